// Package awsauth reads and edits the aws-auth ConfigMap that maps IAM
// roles to Kubernetes identities in EKS clusters that use CONFIG_MAP
// authentication. Edits are textual: an entry is appended to mapRoles and
// removed again byte for byte, so every other entry, key, comment and
// spelling is kept as it was.
package awsauth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Data keys of the aws-auth ConfigMap.
const (
	KeyMapRoles    = "mapRoles"
	KeyMapUsers    = "mapUsers"
	KeyMapAccounts = "mapAccounts"
)

// Marker is the comment line written above every entry this package adds;
// it is how an entry is recognised as ours.
const Marker = "# managed-by: karpenter-migrate (removed by karpenter-migrate iam delete)"

// MapRole is one mapRoles entry.
type MapRole struct {
	RoleARN  string   `json:"rolearn"`
	Username string   `json:"username"`
	Groups   []string `json:"groups"`
}

// Status is what mapRoles holds for a role.
type Status struct {
	// Present: an entry names the role.
	Present bool
	// Ours: that entry carries Marker.
	Ours bool
	// Matches: its username and groups are the desired ones.
	Matches bool
	// Diff describes how it differs.
	Diff []string
	// Line is the entry's line in mapRoles.
	Line int
}

// Entry is a parsed mapRoles entry.
type Entry struct {
	MapRole
	Line int
	Ours bool
	node *yaml.Node
}

// ParseError points at the offending line of one data key.
type ParseError struct {
	Key  string
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("aws-auth data.%s line %d: %s", e.Key, e.Line, e.Msg)
	}
	return fmt.Sprintf("aws-auth data.%s: %s", e.Key, e.Msg)
}

// parseSeq parses one data value, which must be empty or a single YAML
// sequence. It returns the sequence node (nil when empty).
func parseSeq(key, text string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(strings.NewReader(text))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	if err != nil {
		line := yamlErrLine(err)
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		msg = strings.TrimPrefix(msg, fmt.Sprintf("line %d: ", line))
		return nil, &ParseError{Key: key, Line: line, Msg: msg}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		line := extra.Line
		if err != nil {
			line = yamlErrLine(err)
		}
		return nil, &ParseError{Key: key, Line: line, Msg: "more than one YAML document; aws-auth reads only a single list"}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.SequenceNode {
		return nil, &ParseError{Key: key, Line: root.Line, Msg: fmt.Sprintf("want a list, found a %s", kindName(root))}
	}
	return root, nil
}

func yamlErrLine(err error) int {
	var te *yaml.TypeError
	msg := err.Error()
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	var line int
	if i := strings.Index(msg, "line "); i >= 0 {
		_, _ = fmt.Sscanf(msg[i:], "line %d", &line)
	}
	return line
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar " + n.Value
	case yaml.AliasNode:
		return "alias"
	}
	return "document"
}

// mapField returns the value node of key in a mapping node.
func mapField(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalarField(key string, item *yaml.Node, field string, required bool) (string, error) {
	v := mapField(item, field)
	if v == nil {
		if required {
			return "", &ParseError{Key: key, Line: item.Line, Msg: fmt.Sprintf("entry has no %s", field)}
		}
		return "", nil
	}
	if v.Kind != yaml.ScalarNode {
		return "", &ParseError{Key: key, Line: v.Line, Msg: fmt.Sprintf("%s: want a string, found a %s", field, kindName(v))}
	}
	return v.Value, nil
}

// ParseMapRoles parses and validates mapRoles.
func ParseMapRoles(text string) ([]Entry, error) {
	seq, err := parseSeq(KeyMapRoles, text)
	if err != nil || seq == nil {
		return nil, err
	}
	var out []Entry
	for _, item := range seq.Content {
		if item.Kind != yaml.MappingNode {
			return nil, &ParseError{Key: KeyMapRoles, Line: item.Line, Msg: fmt.Sprintf("entry: want a mapping with rolearn, username and groups, found a %s", kindName(item))}
		}
		e := Entry{Line: item.Line, node: item, Ours: strings.Contains(item.HeadComment, Marker)}
		if e.RoleARN, err = scalarField(KeyMapRoles, item, "rolearn", true); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(e.RoleARN, "arn:") {
			return nil, &ParseError{Key: KeyMapRoles, Line: item.Line, Msg: fmt.Sprintf("rolearn %q is not an ARN", e.RoleARN)}
		}
		if e.Username, err = scalarField(KeyMapRoles, item, "username", false); err != nil {
			return nil, err
		}
		if g := mapField(item, "groups"); g != nil {
			if g.Kind != yaml.SequenceNode {
				if !(g.Kind == yaml.ScalarNode && g.Tag == "!!null") {
					return nil, &ParseError{Key: KeyMapRoles, Line: g.Line, Msg: fmt.Sprintf("groups: want a list, found a %s", kindName(g))}
				}
			} else {
				for _, s := range g.Content {
					if s.Kind != yaml.ScalarNode {
						return nil, &ParseError{Key: KeyMapRoles, Line: s.Line, Msg: fmt.Sprintf("groups: want strings, found a %s", kindName(s))}
					}
					e.Groups = append(e.Groups, s.Value)
				}
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// Validate checks every key aws-auth reads: mapRoles and mapUsers are lists
// of mappings naming an ARN, mapAccounts a list of account ids.
func Validate(data map[string]string) error {
	if _, err := ParseMapRoles(data[KeyMapRoles]); err != nil {
		return err
	}
	seq, err := parseSeq(KeyMapUsers, data[KeyMapUsers])
	if err != nil {
		return err
	}
	if seq != nil {
		for _, item := range seq.Content {
			if item.Kind != yaml.MappingNode {
				return &ParseError{Key: KeyMapUsers, Line: item.Line, Msg: fmt.Sprintf("entry: want a mapping with userarn, found a %s", kindName(item))}
			}
			if _, err := scalarField(KeyMapUsers, item, "userarn", true); err != nil {
				return err
			}
		}
	}
	seq, err = parseSeq(KeyMapAccounts, data[KeyMapAccounts])
	if err != nil {
		return err
	}
	if seq != nil {
		for _, item := range seq.Content {
			if item.Kind != yaml.ScalarNode {
				return &ParseError{Key: KeyMapAccounts, Line: item.Line, Msg: fmt.Sprintf("want account ids, found a %s", kindName(item))}
			}
		}
	}
	return nil
}

// Lookup reports what mapRoles holds for e's role.
func Lookup(mapRoles string, e MapRole) (Status, error) {
	entries, err := ParseMapRoles(mapRoles)
	if err != nil {
		return Status{}, err
	}
	for _, have := range entries {
		if have.RoleARN != e.RoleARN {
			continue
		}
		st := Status{Present: true, Ours: have.Ours, Line: have.Line}
		if have.Username != e.Username {
			st.Diff = append(st.Diff, fmt.Sprintf("mapRoles line %d: username %q, desired %q", have.Line, have.Username, e.Username))
		}
		if !sameSet(have.Groups, e.Groups) {
			st.Diff = append(st.Diff, fmt.Sprintf("mapRoles line %d: groups %v, desired %v", have.Line, have.Groups, e.Groups))
		}
		st.Matches = len(st.Diff) == 0
		return st, nil
	}
	return Status{}, nil
}

func sameSet(a, b []string) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(slices.Compact(x), slices.Compact(y))
}

// block renders e as a block-style list item at the given indentation,
// under Marker, ending with a newline.
func block(e MapRole, indent string) string {
	var b strings.Builder
	b.WriteString(indent + Marker + "\n")
	b.WriteString(indent + "- groups:\n")
	for _, g := range e.Groups {
		fmt.Fprintf(&b, "%s  - %s\n", indent, scalar(g))
	}
	fmt.Fprintf(&b, "%s  rolearn: %s\n", indent, scalar(e.RoleARN))
	fmt.Fprintf(&b, "%s  username: %s\n", indent, scalar(e.Username))
	return b.String()
}

// scalar renders s plain when it reads back as the same string, quoted
// otherwise.
func scalar(s string) string {
	var m map[string]any
	if s != "" && !strings.ContainsAny(s, "\n#\"'") && yaml.Unmarshal([]byte("k: "+s), &m) == nil {
		if v, ok := m["k"].(string); ok && v == s {
			return s
		}
	}
	out, _ := yaml.Marshal(s)
	return strings.TrimSuffix(string(out), "\n")
}

// Merge adds e to mapRoles, under Marker, and returns the new text. Existing
// text is kept byte for byte: the entry is appended at the list's
// indentation. A role already present is left alone (changed is false);
// Lookup tells whether it matches. A flow-style list ([...]) cannot be
// appended to and is re-rendered in block style.
func Merge(mapRoles string, e MapRole) (out string, changed bool, err error) {
	entries, err := ParseMapRoles(mapRoles)
	if err != nil {
		return "", false, err
	}
	for _, have := range entries {
		if have.RoleARN == e.RoleARN {
			return mapRoles, false, nil
		}
	}
	seq, _ := parseSeq(KeyMapRoles, mapRoles)
	indent := ""
	if seq != nil && seq.Style&yaml.FlowStyle == 0 && len(seq.Content) > 0 {
		indent = strings.Repeat(" ", max(seq.Column-1, 0))
	}
	blk := block(e, indent)
	switch {
	case seq != nil && seq.Style&yaml.FlowStyle != 0:
		seq.Style = 0
		var buf bytes.Buffer
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(seq); err != nil {
			return "", false, fmt.Errorf("re-render flow-style mapRoles: %w", err)
		}
		out = buf.String() + blk
	case mapRoles == "" || strings.HasSuffix(mapRoles, "\n"):
		out = mapRoles + blk
	default:
		// No final newline: add one before the block and drop the block's,
		// so that removing "\n"+block restores the original exactly.
		out = mapRoles + "\n" + strings.TrimSuffix(blk, "\n")
	}
	if err := checkMerged(entries, out, e); err != nil {
		return "", false, err
	}
	return out, true, nil
}

// checkMerged verifies the merged text reads back as the original entries
// followed by e.
func checkMerged(before []Entry, merged string, e MapRole) error {
	after, err := ParseMapRoles(merged)
	if err != nil {
		return fmt.Errorf("merged mapRoles does not parse (not written): %w", err)
	}
	if len(after) != len(before)+1 {
		return fmt.Errorf("merged mapRoles has %d entries, want %d (not written); add the entry by hand", len(after), len(before)+1)
	}
	for i := range before {
		if !entryEqual(before[i], after[i]) {
			return fmt.Errorf("merging would change the entry at mapRoles line %d (not written); add the entry by hand", before[i].Line)
		}
	}
	last := after[len(after)-1]
	if last.RoleARN != e.RoleARN || last.Username != e.Username || !slices.Equal(last.Groups, e.Groups) || !last.Ours {
		return errors.New("the merged entry does not read back as written (not written); add the entry by hand")
	}
	return nil
}

func entryEqual(a, b Entry) bool {
	var x, y any
	if a.node.Decode(&x) != nil || b.node.Decode(&y) != nil {
		return false
	}
	ax, _ := yaml.Marshal(x)
	by, _ := yaml.Marshal(y)
	return bytes.Equal(ax, by)
}

// Remove deletes the entry for e's role that Merge added and returns the
// new text; changed is false when there is no such entry. An entry for the
// role without Marker is not ours and is kept.
func Remove(mapRoles string, e MapRole) (out string, changed bool, err error) {
	entries, err := ParseMapRoles(mapRoles)
	if err != nil {
		return "", false, err
	}
	ours := slices.IndexFunc(entries, func(x Entry) bool { return x.RoleARN == e.RoleARN && x.Ours })
	if ours < 0 {
		return mapRoles, false, nil
	}
	seq, _ := parseSeq(KeyMapRoles, mapRoles)
	// Exactly as written: remove the bytes. Merge used the list's
	// indentation, which is found by trying each.
	for n := 0; n <= seq.Column+8; n++ {
		blk := block(e, strings.Repeat(" ", n))
		if i := indexAtLineStart(mapRoles, blk); i >= 0 {
			return mapRoles[:i] + mapRoles[i+len(blk):], true, nil
		}
		if tail := "\n" + strings.TrimSuffix(blk, "\n"); strings.HasSuffix(mapRoles, tail) {
			return strings.TrimSuffix(mapRoles, tail), true, nil
		}
	}
	// Edited since: drop the node and re-render.
	// entries and seq.Content are parallel: both come from the same text.
	seq.Content = slices.Delete(seq.Content, ours, ours+1)
	if len(seq.Content) == 0 {
		return "", true, nil
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(seq); err != nil {
		return "", false, fmt.Errorf("re-render mapRoles: %w", err)
	}
	return buf.String(), true, nil
}

func indexAtLineStart(s, sub string) int {
	from := 0
	for {
		i := strings.Index(s[from:], sub)
		if i < 0 {
			return -1
		}
		i += from
		if i == 0 || s[i-1] == '\n' {
			return i
		}
		from = i + 1
	}
}
