package awsfake

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
)

// param is a scalar query parameter ("" when absent).
func (c *call) param(name string) string { return c.form.Get(name) }

// hasParam reports whether a query parameter was sent.
func (c *call) hasParam(name string) bool { _, ok := c.form[name]; return ok }

// list reads a serialized list: awsquery "Names.member.1, .2, ..." (pass
// "Names.member") or ec2query "InstanceId.1, .2, ..." (pass "InstanceId").
func (c *call) list(prefix string) []string {
	idx := c.indexes(prefix)
	out := make([]string, 0, len(idx))
	for _, i := range idx {
		out = append(out, c.form.Get(prefix+"."+strconv.Itoa(i)))
	}
	return out
}

// indexes returns the sorted N of every "prefix.N" or "prefix.N.*" key.
func (c *call) indexes(prefix string) []int {
	seen := map[int]bool{}
	for k := range c.form {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		head, _, _ := strings.Cut(rest, ".")
		if n, err := strconv.Atoi(head); err == nil {
			seen[n] = true
		}
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// filter is an EC2 or Auto Scaling Filter.
type filter struct {
	Name   string
	Values []string
}

// filters reads "Filter.N.Name"/"Filter.N.Value.M" (ec2query: prefix
// "Filter", values "Value") or "Filters.member.N.Name"/
// "Filters.member.N.Values.member.M" (awsquery: prefix "Filters.member",
// values "Values.member").
func (c *call) filters(prefix, values string) []filter {
	var out []filter
	for _, i := range c.indexes(prefix) {
		p := prefix + "." + strconv.Itoa(i)
		out = append(out, filter{Name: c.form.Get(p + ".Name"), Values: c.list(p + "." + values)})
	}
	return out
}

// int32Param parses an optional integer parameter.
func (c *call) int32Param(name string) (*int32, error) {
	s := c.param(name)
	if s == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return nil, c.invalidParam(name, s)
	}
	v := int32(n)
	return &v, nil
}

// boolParam parses an optional boolean parameter.
func (c *call) boolParam(name string) (*bool, error) {
	s := c.param(name)
	if s == "" {
		return nil, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return nil, c.invalidParam(name, s)
	}
	return &b, nil
}

// invalidParam is the service's error for a malformed parameter value.
func (c *call) invalidParam(name, value string) *Error {
	if c.proto == ec2Query {
		return errorf(http.StatusBadRequest, "InvalidParameterValue", "Value (%s) for parameter %s is invalid.", value, name)
	}
	return validationError("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint", value, name)
}

// missingParam is the service's error for an absent required parameter.
func (c *call) missingParam(name string) *Error {
	if c.proto == ec2Query {
		return errorf(http.StatusBadRequest, "MissingParameter", "The request must contain the parameter %s", name)
	}
	if c.proto == awsQuery {
		return validationError("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", name)
	}
	return errorf(http.StatusBadRequest, "InvalidParameterException", "%s is required", name)
}

// decodeJSON decodes a JSON request body into v (a struct with json tags).
func (c *call) decodeJSON(v any) error {
	if len(c.body) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.body, v); err != nil {
		if c.proto == restJSON1 {
			return errorf(http.StatusBadRequest, "InvalidParameterException", "malformed request body: %v", err)
		}
		return errorf(http.StatusBadRequest, "SerializationException", "malformed request body: %v", err)
	}
	return nil
}

// pathValue reads a restJson1 path parameter.
func (c *call) pathValue(name string) string { return c.req.PathValue(name) }

// paginate returns the page of items starting at token, at most max long
// (def when max is nil), and the token for the next page ("" at the end).
func paginate[T any](c *call, items []T, token string, max *int32, def, limit int32) ([]T, string, error) {
	n := def
	if max != nil {
		n = *max
	}
	if n < 1 || n > limit {
		return nil, "", c.invalidParam("MaxRecords/MaxResults", strconv.Itoa(int(n)))
	}
	start := 0
	if token != "" {
		b, err := base64.RawURLEncoding.DecodeString(token)
		off, aerr := strconv.Atoi(strings.TrimPrefix(string(b), "awsfake:"))
		if err != nil || aerr != nil || !strings.HasPrefix(string(b), "awsfake:") || off < 0 || off > len(items) {
			code := "InvalidNextToken"
			if c.proto == ec2Query {
				code = "InvalidNextToken.Malformed"
			}
			return nil, "", errorf(http.StatusBadRequest, code, "The token '%s' is invalid.", token)
		}
		start = off
	}
	end := start + int(n)
	if end >= len(items) {
		return items[start:], "", nil
	}
	return items[start:end], base64.RawURLEncoding.EncodeToString([]byte("awsfake:" + strconv.Itoa(end))), nil
}

// matchValue matches v against filter values, which may use * and ? wildcards.
func matchValue(values []string, v string) bool {
	for _, want := range values {
		if want == v {
			return true
		}
		if strings.ContainsAny(want, "*?") {
			if ok, _ := path.Match(want, v); ok {
				return true
			}
		}
	}
	return false
}

// matchTags applies tag:<key>, tag-key and tag-value filters; handled is
// false for any other filter name.
func matchTags(f filter, tags map[string]string) (match, handled bool) {
	switch {
	case strings.HasPrefix(f.Name, "tag:"):
		v, ok := tags[strings.TrimPrefix(f.Name, "tag:")]
		return ok && matchValue(f.Values, v), true
	case f.Name == "tag-key":
		for k := range tags {
			if matchValue(f.Values, k) {
				return true, true
			}
		}
		return false, true
	case f.Name == "tag-value":
		for _, v := range tags {
			if matchValue(f.Values, v) {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}
