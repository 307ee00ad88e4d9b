package inventory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// A snapshot that fails to decode only says why (a quantity that does not
// match its regular expression, an unknown field) but not where: locate
// decodes the document again piece by piece, down to the smallest value
// that fails, and names its JSON path and the object it belongs to.

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	quantityType    = reflect.TypeFor[resource.Quantity]()
)

// jsonPath is where locate is in the document; named is the length of the
// path up to the last list entry that has a name, and obj that name.
type jsonPath struct {
	parts []string
	named int
	obj   string
}

func (p jsonPath) field(name string) jsonPath {
	part := "." + name
	if strings.ContainsFunc(name, func(r rune) bool { return r == '.' || r == '/' || r == ' ' }) {
		part = fmt.Sprintf("[%q]", name) // requests["nvidia.com/gpu"]
	}
	p.parts = append(slices.Clip(p.parts), part)
	return p
}

func (p jsonPath) index(i int, raw []byte) jsonPath {
	p.parts = append(slices.Clip(p.parts), fmt.Sprintf("[%d]", i))
	var id struct{ Namespace, Name string }
	if json.Unmarshal(raw, &id) == nil && id.Name != "" {
		p.named, p.obj = len(p.parts), id.Name
		if id.Namespace != "" {
			p.obj = id.Namespace + "/" + id.Name
		}
	}
	return p
}

// String is "inventory.pods[0] (api/billing-x): requests.cpu", or the bare
// path when no named object encloses it.
func (p jsonPath) String() string {
	all := strings.TrimPrefix(strings.Join(p.parts, ""), ".")
	if all == "" {
		return "top level"
	}
	if p.obj == "" {
		return all
	}
	head := strings.TrimPrefix(strings.Join(p.parts[:p.named], ""), ".")
	rest := strings.TrimPrefix(strings.Join(p.parts[p.named:], ""), ".")
	if rest == "" {
		return fmt.Sprintf("%s (%s)", head, p.obj)
	}
	return fmt.Sprintf("%s (%s): %s", head, p.obj, rest)
}

func decodeStrict(raw []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(reflect.New(t).Interface())
}

// locate returns an error naming the path of the smallest value in raw
// that does not decode into t, or nil when raw decodes.
func locate(raw []byte, t reflect.Type) error {
	return locateAt(raw, t, jsonPath{})
}

func locateAt(raw []byte, t reflect.Type, p jsonPath) error {
	err := decodeStrict(raw, t)
	if err == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return leafError(raw, t, p, err)
	}
	switch t.Kind() {
	case reflect.Struct:
		var fields map[string]json.RawMessage
		if json.Unmarshal(raw, &fields) != nil {
			break
		}
		for _, key := range slices.Sorted(maps.Keys(fields)) {
			f, name, ok := jsonField(t, key)
			if !ok {
				return fmt.Errorf("%s: unknown field %q (misspelt, or written by another version?)", p, key)
			}
			if e := locateAt(fields[key], f.Type, p.field(name)); e != nil {
				return e
			}
		}
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			break
		}
		for i, item := range items {
			if e := locateAt(item, t.Elem(), p.index(i, item)); e != nil {
				return e
			}
		}
	case reflect.Map:
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			break
		}
		for _, key := range slices.Sorted(maps.Keys(m)) {
			if e := locateAt(m[key], t.Elem(), p.field(key)); e != nil {
				return e
			}
		}
	}
	return leafError(raw, t, p, err)
}

// leafError says what is wrong with one value.
func leafError(raw []byte, t reflect.Type, p jsonPath, err error) error {
	val := string(bytes.TrimSpace(raw))
	if len(val) > 40 {
		val = val[:37] + "..."
	}
	var typ *json.UnmarshalTypeError
	switch {
	case t == quantityType:
		return fmt.Errorf("%s %s is not a quantity (write it like 250m, 2, 512Mi or 1.5Gi)", p, val)
	case errors.As(err, &typ):
		return fmt.Errorf("%s %s: want %s", p, val, want(t))
	}
	return fmt.Errorf("%s %s: %v", p, val, err)
}

// want describes the JSON a Go type decodes from.
func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	default:
		return "an object"
	}
}

// jsonField finds the struct field encoding/json decodes key into, and its
// JSON name: tags, else field names, matched without regard to case;
// embedded structs without a tag are searched as encoding/json inlines them.
func jsonField(t reflect.Type, key string) (reflect.StructField, string, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && tag == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if inner, name, ok := jsonField(ft, key); ok {
					return inner, name, true
				}
				continue
			}
		}
		name := tag
		if name == "" {
			name = f.Name
		}
		if strings.EqualFold(name, key) {
			return f, name, true
		}
	}
	return reflect.StructField{}, "", false
}
