package desired

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// PolicyVersion is the IAM policy language version every document uses.
const PolicyVersion = "2012-10-17"

// PolicyDocument is an IAM (or SQS resource) policy document.
type PolicyDocument struct {
	// Version is the policy language version; an SQS queue policy may
	// omit it, as Karpenter's template does.
	Version string `json:"Version,omitempty"`
	// Id names the document (SQS queue policies).
	Id        string      `json:"Id,omitempty"`
	Statement []Statement `json:"Statement"`
}

// Statement is one statement of a policy document.
type Statement struct {
	Sid       string     `json:"Sid,omitempty"`
	Effect    string     `json:"Effect"`
	Principal *Principal `json:"Principal,omitempty"`
	Action    StringList `json:"Action"`
	Resource  StringList `json:"Resource,omitempty"`
	// Condition maps an operator (StringEquals) to keys and their values.
	Condition map[string]map[string]StringList `json:"Condition,omitempty"`
}

// Principal is a statement's principal: either "*" (All) or a map of
// principal types (Service, Federated, AWS) to identifiers.
type Principal struct {
	All bool
	IDs map[string]StringList
}

// MarshalJSON writes "*" or the map.
func (p Principal) MarshalJSON() ([]byte, error) {
	if p.All {
		return []byte(`"*"`), nil
	}
	return json.Marshal(p.IDs)
}

// UnmarshalJSON reads "*" or a map of principal types.
func (p *Principal) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if s != "*" {
			return fmt.Errorf("principal %q: want \"*\" or an object", s)
		}
		*p = Principal{All: true}
		return nil
	}
	return json.Unmarshal(b, &p.IDs)
}

// StringList is a JSON value that IAM writes either as one string or as an
// array of strings. Booleans and numbers (Bool conditions) read as strings.
type StringList []string

// MarshalJSON writes a single value as a string and several as an array.
func (l StringList) MarshalJSON() ([]byte, error) {
	if len(l) == 1 {
		return json.Marshal(l[0])
	}
	return json.Marshal([]string(l))
}

// UnmarshalJSON accepts a string, bool, number or an array of those.
func (l *StringList) UnmarshalJSON(b []byte) error {
	var raw any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	one := func(v any) (string, error) {
		switch v := v.(type) {
		case string:
			return v, nil
		case bool:
			return strconv.FormatBool(v), nil
		case json.Number:
			return v.String(), nil
		}
		return "", fmt.Errorf("want a string, got %T", v)
	}
	if arr, ok := raw.([]any); ok {
		out := make(StringList, 0, len(arr))
		for _, v := range arr {
			s, err := one(v)
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		*l = out
		return nil
	}
	s, err := one(raw)
	if err != nil {
		return err
	}
	*l = StringList{s}
	return nil
}

// JSON renders the document as indented JSON, the form plans print and the
// form sent to AWS.
func (d PolicyDocument) JSON() string {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		// Every field is a string, list or map of them: this cannot fail.
		return fmt.Sprintf("<unrenderable policy: %v>", err)
	}
	return string(b)
}

// Canonical returns a copy with every list sorted and de-duplicated and the
// statements ordered, so that two documents that mean the same compare equal.
func (d PolicyDocument) Canonical() PolicyDocument {
	out := PolicyDocument{Version: d.Version, Id: d.Id, Statement: make([]Statement, 0, len(d.Statement))}
	for _, s := range d.Statement {
		c := Statement{Sid: s.Sid, Effect: s.Effect, Action: canonList(s.Action), Resource: canonList(s.Resource)}
		if s.Principal != nil {
			p := Principal{All: s.Principal.All}
			if len(s.Principal.IDs) > 0 {
				p.IDs = make(map[string]StringList, len(s.Principal.IDs))
				for k, v := range s.Principal.IDs {
					p.IDs[k] = canonList(v)
				}
			}
			c.Principal = &p
		}
		if len(s.Condition) > 0 {
			c.Condition = make(map[string]map[string]StringList, len(s.Condition))
			for op, kv := range s.Condition {
				m := make(map[string]StringList, len(kv))
				for k, v := range kv {
					m[k] = canonList(v)
				}
				c.Condition[op] = m
			}
		}
		out.Statement = append(out.Statement, c)
	}
	sort.SliceStable(out.Statement, func(i, j int) bool {
		a, b := out.Statement[i], out.Statement[j]
		if a.Sid != b.Sid {
			return a.Sid < b.Sid
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		return string(ja) < string(jb)
	})
	return out
}

func canonList(l StringList) StringList {
	if len(l) == 0 {
		return nil
	}
	c := slices.Clone(l)
	slices.Sort(c)
	return slices.Compact(c)
}

// Equal reports whether two documents grant the same thing (same statements
// modulo ordering and the string-or-list spelling).
func (d PolicyDocument) Equal(o PolicyDocument) bool {
	a, _ := json.Marshal(d.Canonical())
	b, _ := json.Marshal(o.Canonical())
	return bytes.Equal(a, b)
}

// ParsePolicy reads a policy document as IAM returns it: JSON, possibly
// URL-encoded (GetRole, GetPolicyVersion).
func ParsePolicy(s string) (PolicyDocument, error) {
	raw := strings.TrimSpace(s)
	if strings.HasPrefix(raw, "%7B") || strings.HasPrefix(raw, "%7b") {
		dec, err := url.QueryUnescape(raw)
		if err != nil {
			return PolicyDocument{}, fmt.Errorf("URL-decode policy document: %w", err)
		}
		raw = dec
	}
	var d PolicyDocument
	dec := json.NewDecoder(strings.NewReader(raw))
	if err := dec.Decode(&d); err != nil {
		return PolicyDocument{}, fmt.Errorf("parse policy document: %w", err)
	}
	return d, nil
}

// CanonicalJSON re-renders a JSON value with sorted keys and no spacing, so
// two spellings of the same EventBridge event pattern compare equal.
func CanonicalJSON(s string) (string, error) {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Statement helpers.

func allow(sid string, actions, resources []string) Statement {
	return Statement{Sid: sid, Effect: "Allow", Action: actions, Resource: resources}
}

func (s Statement) when(op, key string, values ...string) Statement {
	if s.Condition == nil {
		s.Condition = map[string]map[string]StringList{}
	}
	if s.Condition[op] == nil {
		s.Condition[op] = map[string]StringList{}
	}
	s.Condition[op][key] = append(s.Condition[op][key], values...)
	return s
}
