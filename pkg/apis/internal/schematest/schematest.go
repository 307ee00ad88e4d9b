// Package schematest checks that Go API types and an official CRD schema
// describe the same fields, so a field the CRD has and the types lack (or a
// misspelt json tag) fails a test instead of vanishing in a conversion.
package schematest

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Diff compares the openAPIV3Schema of `version` in the CRD file at path,
// below .properties.spec, with the json fields of the Go type of spec. It
// returns one line per field present on only one side.
func Diff(path, version string, spec any) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema schema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != version {
			continue
		}
		s, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if !ok {
			return nil, fmt.Errorf("%s %s: no spec in schema", path, version)
		}
		var out []string
		compare("spec", &s, reflect.TypeOf(spec), &out)
		sort.Strings(out)
		return out, nil
	}
	return nil, fmt.Errorf("%s: no version %s", path, version)
}

type schema struct {
	Type                 string            `json:"type"`
	Properties           map[string]schema `json:"properties"`
	Items                *schema           `json:"items"`
	AdditionalProperties *schema           `json:"additionalProperties"`
}

func compare(path string, s *schema, t reflect.Type, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case len(s.Properties) > 0:
		if t.Kind() != reflect.Struct {
			if t.Kind() == reflect.Map || t.Kind() == reflect.Interface {
				return // an open object (e.g. a raw provider block)
			}
			*out = append(*out, fmt.Sprintf("%s: schema object, Go %s", path, t))
			return
		}
		fields := jsonFields(t)
		for name, prop := range s.Properties {
			ft, ok := fields[name]
			if !ok {
				*out = append(*out, fmt.Sprintf("%s.%s: in the CRD, missing from the Go type %s", path, name, t))
				continue
			}
			compare(path+"."+name, &prop, ft, out)
		}
		for name := range fields {
			if _, ok := s.Properties[name]; !ok {
				*out = append(*out, fmt.Sprintf("%s.%s: in the Go type %s, not in the CRD", path, name, t))
			}
		}
	case s.Items != nil:
		if t.Kind() != reflect.Slice {
			*out = append(*out, fmt.Sprintf("%s: schema array, Go %s", path, t))
			return
		}
		compare(path+"[]", s.Items, t.Elem(), out)
	case s.AdditionalProperties != nil:
		if t.Kind() != reflect.Map {
			*out = append(*out, fmt.Sprintf("%s: schema map, Go %s", path, t))
			return
		}
		compare(path+"{}", s.AdditionalProperties, t.Elem(), out)
	}
}

// jsonFields maps json names to field types, following inlined embeds.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if name == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					fields[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		fields[name] = f.Type
	}
	return fields
}
