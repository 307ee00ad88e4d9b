package convert

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
	kjson "sigs.k8s.io/json"
)

// decodeStrict decodes the document into v, refusing unknown fields. On
// failure it walks the object to name the offending field and its line.
func decodeStrict(d *Document, v any) error {
	return decodeAt(d, d.JSON, nil, v)
}

// decodeAt decodes raw, found at path prefix in d, into v.
func decodeAt(d *Document, raw []byte, prefix []any, v any) error {
	strictErrs, err := kjson.UnmarshalStrict(raw, v, kjson.DisallowUnknownFields, kjson.DisallowDuplicateFields)
	if err == nil && len(strictErrs) == 0 {
		return nil
	}
	if err == nil {
		err = strictErrs[0]
	}
	var generic any
	if json.Unmarshal(raw, &generic) == nil {
		if segs, derr := diagnose(generic, reflect.TypeOf(v).Elem(), append([]any(nil), prefix...)); derr != nil {
			return fieldError(d, segs, derr)
		}
	}
	return &Error{Doc: d, Field: formatPath(prefix), Err: err}
}

func fieldError(d *Document, segs []any, err error) *Error {
	field := formatPath(segs)
	if line := lineOf(d, segs); line > 0 {
		field += fmt.Sprintf(" (line %d)", line)
	}
	return &Error{Doc: d, Field: field, Err: err}
}

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()

// diagnose finds the first value that does not fit type t.
func diagnose(v any, t reflect.Type, path []any) ([]any, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		return nil, nil
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		b, _ := json.Marshal(v)
		if err := json.Unmarshal(b, reflect.New(t).Interface()); err != nil {
			return path, cleanJSONError(err, v)
		}
		return nil, nil
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return path, fmt.Errorf("want an object, got %s", describe(v))
		}
		fields := jsonFields(t)
		for _, k := range sortedKeys(m) {
			ft, ok := fields[k]
			if !ok {
				return append(path, k), fmt.Errorf("unknown field for %s; check the spelling and the apiVersion (known: %s)", t.Name(), strings.Join(sortedKeys(fields), ", "))
			}
			if p, err := diagnose(m[k], ft, append(path, k)); err != nil {
				return p, err
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return path, fmt.Errorf("want a map, got %s", describe(v))
		}
		for _, k := range sortedKeys(m) {
			if p, err := diagnose(m[k], t.Elem(), append(path, k)); err != nil {
				return p, err
			}
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 { // []byte, json.RawMessage
			return nil, nil
		}
		s, ok := v.([]any)
		if !ok {
			return path, fmt.Errorf("want a list, got %s", describe(v))
		}
		for i, e := range s {
			if p, err := diagnose(e, t.Elem(), append(path, i)); err != nil {
				return p, err
			}
		}
	case reflect.Interface:
	default:
		b, _ := json.Marshal(v)
		if err := json.Unmarshal(b, reflect.New(t).Interface()); err != nil {
			return path, fmt.Errorf("want %s, got %s", kindName(t), describe(v))
		}
	}
	return nil, nil
}

func cleanJSONError(err error, v any) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("want %s, got %s", kindName(te.Type), describe(v))
	}
	return fmt.Errorf("%s: %w", describe(v), err)
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer (" + t.Kind().String() + ")"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice:
		return "a list"
	}
	return t.String()
}

func describe(v any) string {
	switch x := v.(type) {
	case string:
		return "string " + strconv.Quote(x)
	case float64:
		return "number " + strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return "boolean " + strconv.FormatBool(x)
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	return fmt.Sprint(v)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// jsonFields maps the json names of a struct to their types, following
// inlined embedded structs as encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
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

// formatPath renders spec.limits["cpu"] style paths.
func formatPath(segs []any) string {
	var b strings.Builder
	for _, s := range segs {
		switch x := s.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", x)
		case string:
			if strings.ContainsAny(x, "./") {
				fmt.Fprintf(&b, "[%q]", x)
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(x)
		}
	}
	return b.String()
}

// lineOf finds the line of a path in the document's YAML, 0 if unknown.
func lineOf(d *Document, segs []any) int {
	if len(d.yaml) == 0 {
		return 0
	}
	var root yaml3.Node
	if yaml3.Unmarshal(d.yaml, &root) != nil || len(root.Content) == 0 {
		return 0
	}
	n := root.Content[0]
	if d.Item >= 0 {
		segs = append([]any{"items", d.Item}, segs...)
	}
	for idx, s := range segs {
		var next *yaml3.Node
		switch x := s.(type) {
		case string:
			if n.Kind == yaml3.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == x {
						next = n.Content[i+1]
						if idx == len(segs)-1 {
							next = n.Content[i] // point at the key
						}
						break
					}
				}
			}
		case int:
			if n.Kind == yaml3.SequenceNode && x < len(n.Content) {
				next = n.Content[x]
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return d.Line + n.Line - 1
}
