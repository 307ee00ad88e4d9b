package convert

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

func seedCases(f *testing.F) {
	f.Helper()
	inputs, _ := filepath.Glob("testdata/cases/*.yaml")
	json, _ := filepath.Glob("testdata/cases/*.json")
	for _, in := range append(inputs, json...) {
		if b, err := os.ReadFile(in); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: 3\n"))
	f.Add([]byte("{\"apiVersion\": 1, \"kind\": []}"))
}

// FuzzParse: the reader never panics, and every document it returns has
// apiVersion, kind and JSON.
func FuzzParse(f *testing.F) {
	seedCases(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, _ := Parse("fuzz.yaml", data)
		for _, d := range docs {
			if d.APIVersion == "" || d.Kind == "" || len(d.JSON) == 0 {
				t.Fatalf("incomplete document %+v", d)
			}
		}
	})
}

// fuzzConvert runs one target on arbitrary input: no panic, and an object
// is only ever output for a document that converted without error.
func fuzzConvert(f *testing.F, opts Options) {
	seedCases(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, _ := Parse("fuzz.yaml", data)
		res, err := Convert(context.Background(), docs, opts)
		if err != nil {
			return
		}
		if _, err := Encode(res.Objects, "yaml"); err != nil {
			t.Fatalf("encode: %v", err)
		}
		if _, err := Encode(res.Objects, "json"); err != nil {
			t.Fatalf("encode: %v", err)
		}
	})
}

func FuzzConvertV1beta1(f *testing.F) { fuzzConvert(f, Options{To: ToV1beta1}) }

func FuzzConvertV1(f *testing.F) { fuzzConvert(f, Options{To: ToV1, Workloads: true}) }
