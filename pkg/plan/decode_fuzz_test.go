package plan

import "testing"

// FuzzDecodeObjects feeds the overlay decoder arbitrary bytes: it returns
// objects or an error naming the document, and never panics.
func FuzzDecodeObjects(f *testing.F) {
	f.Add([]byte("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\n"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("{\"kind\": 3}"))
	f.Add([]byte("a: [\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		objs, err := DecodeObjects(b)
		if err != nil {
			return
		}
		for _, o := range objs {
			if o == nil || len(o.Object) == 0 {
				t.Fatalf("decoded an empty object from %q", b)
			}
		}
	})
}
