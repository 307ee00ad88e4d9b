package awsauth

import (
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

var nodeRole = MapRole{
	RoleARN:  "arn:aws:iam::111122223333:role/KarpenterNodeRole-prod",
	Username: "system:node:{{EC2PrivateDNSName}}",
	Groups:   []string{"system:bootstrappers", "system:nodes"},
}

const eksctlMapRoles = `- groups:
  - system:bootstrappers
  - system:nodes
  rolearn: arn:aws:iam::111122223333:role/eksctl-prod-nodegroup-ng-1-NodeInstanceRole-1
  username: system:node:{{EC2PrivateDNSName}}
- rolearn: arn:aws:iam::111122223333:role/admins   # team admins
  username: admin
  groups: [system:masters]
  x-unknown-key: {keep: me}
`

func TestMergeKeepsExistingBytes(t *testing.T) {
	tests := []struct {
		name, in   string
		wantPrefix string // the merged text must start with this
		wantIndent string
	}{
		{name: "empty", in: "", wantPrefix: "", wantIndent: ""},
		{name: "eksctl block list", in: eksctlMapRoles, wantPrefix: eksctlMapRoles},
		{name: "indented list", in: "  - rolearn: arn:aws:iam::1:role/a\n    username: a\n", wantPrefix: "  - rolearn: arn:aws:iam::1:role/a\n    username: a\n", wantIndent: "  "},
		{name: "no final newline", in: "- rolearn: arn:aws:iam::1:role/a\n  username: a", wantPrefix: "- rolearn: arn:aws:iam::1:role/a\n  username: a\n"},
		{name: "comments kept", in: "# header\n- rolearn: arn:aws:iam::1:role/a # trailing\n  username: a\n# footer\n", wantPrefix: "# header\n- rolearn: arn:aws:iam::1:role/a # trailing\n  username: a\n# footer\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, changed, err := Merge(tt.in, nodeRole)
			if err != nil {
				t.Fatal(err)
			}
			if !changed {
				t.Fatal("changed = false, want true")
			}
			if !strings.HasPrefix(out, tt.wantPrefix) {
				t.Fatalf("existing text not kept:\n%s", out)
			}
			if !strings.Contains(out, "\n"+tt.wantIndent+"- groups:\n") && !strings.HasPrefix(out, Marker) {
				t.Errorf("entry not at indentation %q:\n%s", tt.wantIndent, out)
			}
			st, err := Lookup(out, nodeRole)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Present || !st.Ours || !st.Matches {
				t.Errorf("Lookup after merge = %+v, want present, ours, matching", st)
			}
			again, changed, err := Merge(out, nodeRole)
			if err != nil || changed || again != out {
				t.Errorf("second merge changed the text (changed=%v, err=%v)", changed, err)
			}
			back, removed, err := Remove(out, nodeRole)
			if err != nil || !removed {
				t.Fatalf("Remove: removed=%v err=%v", removed, err)
			}
			if back != tt.in {
				t.Errorf("merge+remove not byte-identical:\n got %q\nwant %q", back, tt.in)
			}
		})
	}
}

func TestMergeFlowStyle(t *testing.T) {
	in := `[{rolearn: "arn:aws:iam::1:role/a", username: a, groups: [x]}]`
	out, changed, err := Merge(in, nodeRole)
	if err != nil || !changed {
		t.Fatalf("Merge: changed=%v err=%v", changed, err)
	}
	entries, err := ParseMapRoles(out)
	if err != nil || len(entries) != 2 || entries[0].RoleARN != "arn:aws:iam::1:role/a" || entries[0].Groups[0] != "x" {
		t.Fatalf("entries after merge = %+v, %v", entries, err)
	}
	back, _, err := Remove(out, nodeRole)
	if err != nil {
		t.Fatal(err)
	}
	if got := decode(t, back); got != decode(t, in) {
		t.Errorf("flow list after merge+remove = %s, want %s", got, decode(t, in))
	}
}

func TestRemoveKeepsEntriesNotOurs(t *testing.T) {
	// The node role is mapped already, by hand: not ours, so never removed.
	in := "- rolearn: " + nodeRole.RoleARN + "\n  username: system:node:{{EC2PrivateDNSName}}\n  groups: [system:bootstrappers, system:nodes]\n"
	out, changed, err := Merge(in, nodeRole)
	if err != nil || changed || out != in {
		t.Fatalf("Merge over a hand-made entry changed it (changed=%v err=%v)", changed, err)
	}
	st, _ := Lookup(in, nodeRole)
	if !st.Present || st.Ours || !st.Matches {
		t.Errorf("Lookup = %+v, want present, not ours, matching", st)
	}
	out, removed, err := Remove(in, nodeRole)
	if err != nil || removed || out != in {
		t.Errorf("Remove touched an entry that is not ours (removed=%v err=%v)", removed, err)
	}
}

func TestRemoveAfterEdit(t *testing.T) {
	merged, _, err := Merge(eksctlMapRoles, nodeRole)
	if err != nil {
		t.Fatal(err)
	}
	// Someone adds a group to our entry: the bytes no longer match, the
	// marker is still there, so the entry is removed by re-rendering.
	edited := strings.Replace(merged, "  - system:nodes\n  rolearn: "+nodeRole.RoleARN, "  - system:nodes\n  - extra\n  rolearn: "+nodeRole.RoleARN, 1)
	if edited == merged {
		t.Fatal("test edit did not apply")
	}
	out, removed, err := Remove(edited, nodeRole)
	if err != nil || !removed {
		t.Fatalf("Remove: removed=%v err=%v", removed, err)
	}
	if got, want := decode(t, out), decode(t, eksctlMapRoles); got != want {
		t.Errorf("after remove:\n%s\nwant entries\n%s", got, want)
	}
}

func TestMalformedReportsLine(t *testing.T) {
	tests := []struct {
		name string
		data map[string]string
		key  string
		line int
	}{
		{"syntax", map[string]string{KeyMapRoles: "- rolearn: arn:aws:iam::1:role/a\n  username: a\n  groups: a: b\n"}, KeyMapRoles, 3},
		{"not a list", map[string]string{KeyMapRoles: "rolearn: arn:aws:iam::1:role/a\n"}, KeyMapRoles, 1},
		{"entry not a mapping", map[string]string{KeyMapRoles: "- rolearn: arn:aws:iam::1:role/a\n- just-a-string\n"}, KeyMapRoles, 2},
		{"missing rolearn", map[string]string{KeyMapRoles: "- rolearn: arn:aws:iam::1:role/a\n- username: x\n"}, KeyMapRoles, 2},
		{"rolearn not an ARN", map[string]string{KeyMapRoles: "- rolearn: KarpenterNodeRole\n"}, KeyMapRoles, 1},
		{"groups not a list", map[string]string{KeyMapRoles: "- rolearn: arn:aws:iam::1:role/a\n  groups:\n    a: b\n"}, KeyMapRoles, 3},
		{"mapUsers without userarn", map[string]string{KeyMapUsers: "- username: x\n"}, KeyMapUsers, 1},
		{"mapAccounts nested", map[string]string{KeyMapAccounts: "- '1'\n- [2]\n"}, KeyMapAccounts, 2},
		{"two documents", map[string]string{KeyMapRoles: "- rolearn: arn:aws:iam::1:role/a\n---\n- rolearn: arn:aws:iam::1:role/b\n"}, KeyMapRoles, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.data)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Validate = %v, want a *ParseError", err)
			}
			if pe.Key != tt.key || pe.Line != tt.line {
				t.Errorf("error at %s line %d, want %s line %d (%v)", pe.Key, pe.Line, tt.key, tt.line, err)
			}
			if _, _, err := Merge(tt.data[KeyMapRoles], nodeRole); tt.key == KeyMapRoles && err == nil {
				t.Error("Merge accepted malformed mapRoles")
			}
		})
	}
}

// decode renders YAML text as canonical YAML of its value, for comparing
// meaning rather than bytes.
func decode(t testing.TB, s string) string {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	if v == nil {
		v = []any{}
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func FuzzMergeRemove(f *testing.F) {
	for _, s := range []string{
		"", eksctlMapRoles, "[]", "- rolearn: arn:aws:iam::1:role/a", "  - rolearn: arn:aws:iam::1:role/a\n    groups:\n    - |+\n      x\n\n",
		"# only a comment\n", "- rolearn: arn:aws:iam::1:role/a\n  username: a\n  groups: [g]\n...\n",
		"- {rolearn: 'arn:aws:iam::1:role/b', username: b}\n- &x {rolearn: 'arn:aws:iam::1:role/c'}\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		before, err := ParseMapRoles(in)
		if err != nil {
			if _, _, merr := Merge(in, nodeRole); merr == nil {
				t.Fatalf("Merge accepted what ParseMapRoles rejects: %v", err)
			}
			return
		}
		merged, changed, err := Merge(in, nodeRole)
		if err != nil {
			return // refused safely: nothing written
		}
		after, err := ParseMapRoles(merged)
		if err != nil {
			t.Fatalf("merged text does not parse: %v\n%q", err, merged)
		}
		for i, e := range before {
			if i >= len(after) || !entryEqual(e, after[i]) {
				t.Fatalf("entry %d (line %d) lost or changed by merge:\n%q", i, e.Line, merged)
			}
		}
		if !changed {
			return // the role was already mapped
		}
		back, removed, err := Remove(merged, nodeRole)
		if err != nil || !removed {
			t.Fatalf("Remove after Merge: removed=%v err=%v\n%q", removed, err, merged)
		}
		seq, _ := parseSeq(KeyMapRoles, in)
		if seq == nil || seq.Style&yaml.FlowStyle == 0 {
			if back != in {
				t.Fatalf("merge+remove changed the text:\n got %q\nwant %q", back, in)
			}
			return
		}
		// A flow list is re-rendered: compare entries.
		final, err := ParseMapRoles(back)
		if err != nil || len(final) != len(before) {
			t.Fatalf("after merge+remove: %d entries (%v), want %d", len(final), err, len(before))
		}
		for i := range before {
			if !entryEqual(before[i], final[i]) {
				t.Fatalf("entry %d changed by merge+remove", i)
			}
		}
	})
}
