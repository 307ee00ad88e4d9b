package convert

import (
	"context"
	"strings"
	"testing"
)

// TestBadInput checks that every kind of bad input fails with the file,
// the line and, for typed fields, the object and the field path.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		opts     Options
		want     []string
	}{
		{
			name: "yaml syntax in second document",
			in:   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nspec:\n  labels: [a\n  b: c\n",
			want: []string{"in.yaml:", "not valid YAML or JSON", "line "},
		},
		{
			name: "tab indent in second document",
			in:   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n\tname: b\n",
			want: []string{"in.yaml:8:", "a tab indents this line; YAML indents with spaces only"},
		},
		{
			name: "no kind",
			in:   "apiVersion: karpenter.sh/v1alpha5\nmetadata: {name: a}\n",
			want: []string{"in.yaml:1", "document has no kind"},
		},
		{
			name: "no apiVersion and no kind",
			in:   "---\n---\nmetadata: {name: a}\n",
			want: []string{"in.yaml:3", "no apiVersion and kind"},
		},
		{
			name: "scalar document",
			in:   "just a string\n",
			want: []string{"in.yaml:1", "must be a mapping"},
		},
		{
			name: "wrong type names the field and line",
			in:   "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: p\nspec:\n  ttlSecondsAfterEmpty: \"abc\"\n",
			want: []string{`Provisioner "p"`, "in.yaml:1", "spec.ttlSecondsAfterEmpty (line 6)", `want an integer (int64), got string "abc"`},
		},
		{
			name: "unknown field",
			in:   "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: p\nspec:\n  providerRef:\n    name: x\n    nmae: y\n",
			want: []string{"spec.providerRef.nmae (line 8)", "unknown field"},
		},
		{
			name: "bad quantity",
			in:   "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: p\nspec:\n  limits:\n    resources:\n      cpu: lots\n",
			want: []string{`spec.limits.resources.cpu (line 8)`, `string "lots"`},
		},
		{
			name: "unknown field in the inline provider",
			in:   "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: p\nspec:\n  provider:\n    subnetSelectr: {a: b}\n",
			want: []string{"spec.provider.subnetSelectr (line 7)", "unknown field"},
		},
		{
			name: "bad duration in v1beta1",
			in:   "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata:\n  name: np\nspec:\n  disruption:\n    expireAfter: 30 days\n  template:\n    spec:\n      nodeClassRef: {name: x}\n      requirements: []\n",
			opts: Options{To: ToV1},
			want: []string{`NodePool "np"`, "spec.disruption.expireAfter (line 7)", "want a duration"},
		},
		{
			name: "List item field error",
			in:   "apiVersion: v1\nkind: List\nitems:\n- apiVersion: karpenter.sh/v1alpha5\n  kind: Provisioner\n  metadata: {name: p}\n  spec:\n    weight: heavy\n",
			want: []string{"items[0]", "spec.weight (line 8)", "want an integer"},
		},
		{
			name: "WhenEmpty without consolidateAfter",
			in:   "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata:\n  name: np\nspec:\n  disruption:\n    consolidationPolicy: WhenEmpty\n  template:\n    spec:\n      nodeClassRef: {name: x}\n      requirements: []\n",
			opts: Options{To: ToV1},
			want: []string{"spec.disruption.consolidateAfter", "is required"},
		},
		{
			name: "selector cross product is bounded",
			in:   "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {name: t}\nspec:\n  subnetSelector:\n    a: 1,2,3,4,5,6,7,8,9,10\n    b: 1,2,3,4,5,6,7,8,9,10\n    c: 1,2,3,4,5,6,7,8,9,10\n    d: 1,2,3,4,5,6,7,8,9,10\n",
			want: []string{`AWSNodeTemplate "t"`, "subnetSelector expands to more than 1000"},
		},
		{
			name: "strict rejects other kinds",
			in:   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\napiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p}\nspec: {}\n",
			opts: Options{Strict: true},
			want: []string{`ConfigMap "c"`, "drop --strict"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := Parse("in.yaml", []byte(tc.in))
			msg := ""
			if err != nil {
				msg = err.Error()
			} else {
				res, err := Convert(context.Background(), docs, tc.opts)
				switch {
				case err != nil:
					msg = err.Error()
				case res.Err() != nil:
					msg = res.Err().Error()
				}
			}
			if msg == "" {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestParseSplitsAndSkips(t *testing.T) {
	in := "# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  uid: x\n  managedFields: []\nstatus: {}\n--- # trailing comment\n\n---\n{\"apiVersion\": \"v1\", \"kind\": \"Secret\", \"metadata\": {\"name\": \"b\"}}\n"
	docs, err := Parse("f.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("got %d documents, want 2", len(docs))
	}
	if docs[0].Line != 3 || docs[1].Line != 13 {
		t.Errorf("lines %d, %d; want 3, 13", docs[0].Line, docs[1].Line)
	}
	if got := string(docs[0].JSON); strings.Contains(got, "uid") || strings.Contains(got, "managedFields") || strings.Contains(got, "status") {
		t.Errorf("server-set fields kept: %s", got)
	}
	if docs[1].Kind != "Secret" || docs[1].Name != "b" {
		t.Errorf("JSON document: got %s %s", docs[1].Kind, docs[1].Name)
	}
}
