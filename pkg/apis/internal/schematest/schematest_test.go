package schematest

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const crd = `spec:
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
        properties:
          spec:
            properties:
              a: {type: string}
              b:
                type: array
                items:
                  properties:
                    c: {type: string}
              m:
                type: object
                additionalProperties:
                  properties:
                    d: {type: string}
`

type inner struct {
	C string `json:"c"`
	X string `json:"x"`
}

type mapped struct {
	D string `json:"d"`
}

type embedded struct {
	A string `json:"a"`
}

type spec struct {
	embedded `json:",inline"`
	B        []*inner          `json:"b"`
	M        map[string]mapped `json:"m"`
	Skip     string            `json:"-"`
}

type missing struct {
	A string `json:"a"`
}

func TestDiff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crd.yaml")
	if err := os.WriteFile(path, []byte(crd), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		spec any
		want []string
	}{
		{"extra and nested", spec{}, []string{"spec.b[].x: in the Go type schematest.inner, not in the CRD"}},
		{"missing", missing{}, []string{
			"spec.b: in the CRD, missing from the Go type schematest.missing",
			"spec.m: in the CRD, missing from the Go type schematest.missing",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Diff(path, "v1", tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
	if _, err := Diff(path, "v2", spec{}); err == nil {
		t.Error("unknown version: want an error")
	}
}
