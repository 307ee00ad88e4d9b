package convert

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/config"
)

// Document is one Kubernetes object read from the input.
type Document struct {
	// Source is the file the document came from ("-" for stdin).
	Source string
	// Line is the 1-based line where the document starts in Source.
	Line int
	// Item is the index inside a `kind: List`, or -1.
	Item int
	// APIVersion and Kind identify the object.
	APIVersion, Kind string
	// Name and Namespace are metadata.name and metadata.namespace.
	Name, Namespace string
	// JSON is the object with status and server-set metadata removed.
	JSON []byte
	// YAML is the original YAML of the whole document, used to find the line
	// of a field named in an error.
	yaml []byte
}

// Where names the document for messages: "file:line" plus the List item.
func (d *Document) Where() string {
	s := fmt.Sprintf("%s:%d", d.Source, d.Line)
	if d.Item >= 0 {
		s += fmt.Sprintf(" (items[%d])", d.Item)
	}
	return s
}

// String names the object and where it came from.
func (d *Document) String() string {
	name := d.Name
	if d.Namespace != "" {
		name = d.Namespace + "/" + name
	}
	return fmt.Sprintf("%s %q (%s)", d.Kind, name, d.Where())
}

// Error is a problem with one input document.
type Error struct {
	Doc *Document
	// Source and Line are set when no document could be formed (parse errors).
	Source string
	Line   int
	// Field is the JSON path of the offending field, if known.
	Field string
	Err   error
}

func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Doc != nil && e.Doc.Kind != "":
		b.WriteString(e.Doc.String())
	case e.Doc != nil:
		b.WriteString(e.Doc.Where())
	default:
		fmt.Fprintf(&b, "%s:%d", e.Source, e.Line)
	}
	if e.Field != "" {
		b.WriteString(": " + e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// ReadOptions says where to read from.
type ReadOptions struct {
	// Filenames are files, directories or "-" for Stdin.
	Filenames []string
	// Recursive descends into subdirectories.
	Recursive bool
	// Stdin is read for "-".
	Stdin io.Reader
}

// Read reads every document of every input. Directories contribute their
// .yaml, .yml and .json files in lexical order. A document that does not
// parse is returned as an *Error in the joined error, next to the documents
// that did parse, so the caller can decide whether to go on.
func Read(ctx context.Context, opts ReadOptions) ([]*Document, error) {
	if len(opts.Filenames) == 0 {
		return nil, errors.New("no input: pass -f FILE, -f DIR or -f - for stdin")
	}
	var docs []*Document
	var errs []error
	for _, name := range opts.Filenames {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if name == "-" {
			if opts.Stdin == nil {
				return nil, errors.New("-f -: no standard input")
			}
			data, err := io.ReadAll(opts.Stdin)
			if err != nil {
				return nil, fmt.Errorf("read stdin: %w", err)
			}
			d, err := Parse("-", data)
			docs = append(docs, d...)
			errs = append(errs, err)
			continue
		}
		files, err := expand(name, opts.Recursive)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", f, err)
			}
			d, err := Parse(f, data)
			docs = append(docs, d...)
			errs = append(errs, err)
		}
	}
	return docs, errors.Join(errs...)
}

func expand(name string, recursive bool) ([]string, error) {
	info, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", name, err)
	}
	if !info.IsDir() {
		return []string{name}, nil
	}
	var files []string
	err = filepath.WalkDir(name, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != name && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", name, err)
	}
	sort.Strings(files)
	return files, nil
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

// Parse splits data into documents (YAML separated by "---", or JSON),
// expands `kind: List`, and strips status and server-set metadata.
func Parse(source string, data []byte) ([]*Document, error) {
	var docs []*Document
	var errs []error
	for _, chunk := range split(data) {
		if len(bytes.TrimSpace(stripComments(chunk.data))) == 0 {
			continue
		}
		j, err := yaml.YAMLToJSON(chunk.data)
		if err != nil {
			line := chunk.line
			msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
			if m := yamlLine.FindStringSubmatch(msg); m != nil {
				n, _ := strconv.Atoi(m[1])
				line = chunk.line + n - 1
				msg = strings.Replace(msg, m[0], "line "+strconv.Itoa(line), 1)
				if tab := config.TabIndent(chunk.data, n); tab > 0 {
					line, msg = chunk.line+tab-1, config.TabIndentAdvice
				}
			}
			errs = append(errs, &Error{Source: source, Line: line, Err: fmt.Errorf("not valid YAML or JSON: %s", msg)})
			continue
		}
		if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal(j, &obj); err != nil {
			errs = append(errs, &Error{Source: source, Line: chunk.line, Err: errors.New("a document must be a mapping with apiVersion and kind")})
			continue
		}
		base := &Document{Source: source, Line: chunk.line, Item: -1, yaml: chunk.data}
		if kind, _ := obj["kind"].(string); kind == "List" || strings.HasSuffix(kind, "List") && obj["items"] != nil {
			items, ok := obj["items"].([]any)
			if !ok {
				errs = append(errs, &Error{Doc: base, Field: "items", Err: errors.New("a List needs an items array")})
				continue
			}
			for i, it := range items {
				m, ok := it.(map[string]any)
				d := *base
				d.Item = i
				if !ok {
					errs = append(errs, &Error{Doc: &d, Err: errors.New("a List item must be an object")})
					continue
				}
				if err := fill(&d, m); err != nil {
					errs = append(errs, err)
					continue
				}
				docs = append(docs, &d)
			}
			continue
		}
		if err := fill(base, obj); err != nil {
			errs = append(errs, err)
			continue
		}
		docs = append(docs, base)
	}
	return docs, errors.Join(errs...)
}

// fill checks apiVersion and kind, strips server-set fields and encodes.
func fill(d *Document, obj map[string]any) error {
	var missing []string
	var ok bool
	if d.APIVersion, ok = obj["apiVersion"].(string); !ok || d.APIVersion == "" {
		missing = append(missing, "apiVersion")
	}
	if d.Kind, ok = obj["kind"].(string); !ok || d.Kind == "" {
		missing = append(missing, "kind")
	}
	if len(missing) > 0 {
		return &Error{Doc: d, Err: fmt.Errorf("document has no %s; every manifest needs apiVersion and kind", strings.Join(missing, " and "))}
	}
	delete(obj, "status")
	if md, ok := obj["metadata"].(map[string]any); ok {
		for _, k := range []string{"managedFields", "creationTimestamp", "resourceVersion", "uid", "generation", "selfLink"} {
			delete(md, k)
		}
		d.Name, _ = md["name"].(string)
		d.Namespace, _ = md["namespace"].(string)
	}
	j, err := json.Marshal(obj)
	if err != nil {
		return &Error{Doc: d, Err: err}
	}
	d.JSON = j
	return nil
}

type chunk struct {
	data []byte
	line int
}

// split cuts YAML at document separators, remembering each start line.
func split(data []byte) []chunk {
	var out []chunk
	var cur bytes.Buffer
	start, n := 1, 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), len(data)+1)
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if isSeparator(line) {
			out = append(out, chunk{data: bytes.Clone(cur.Bytes()), line: start})
			cur.Reset()
			start = n + 1
			continue
		}
		cur.Write(line)
		cur.WriteByte('\n')
	}
	out = append(out, chunk{data: bytes.Clone(cur.Bytes()), line: start})
	return out
}

func isSeparator(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	rest := bytes.TrimSpace(line[3:])
	return len(rest) == 0 || rest[0] == '#'
}

// stripComments drops comment-only lines so that a document of comments
// counts as empty.
func stripComments(b []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}
