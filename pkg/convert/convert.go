package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1alpha5"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/apis/v1beta1"
	"github.com/karpenter-migrate/karpenter-migrate/pkg/atomicfile"
)

// Target API versions.
const (
	ToV1beta1 = "v1beta1"
	ToV1      = "v1"
)

// Options control a conversion.
type Options struct {
	// To is ToV1beta1 (default) or ToV1; v1alpha5 input to v1 chains both steps.
	To string
	// IgnoreDefaults does not add the v1alpha5 defaulting requirements.
	IgnoreDefaults bool
	// Workloads also rewrites Pods and Pod templates that use the legacy keys.
	Workloads bool
	// Strict makes a document of a kind that is not converted an error.
	Strict bool
}

// Object is one output object and the input document it came from.
type Object struct {
	Source *Document
	// Value is a typed API object, or a map for rewritten workloads.
	Value any
}

// Kind and Name of the output object, for file names and messages.
func (o Object) meta() (kind, namespace, name string) {
	var m struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	raw, _ := json.Marshal(o.Value)
	_ = json.Unmarshal(raw, &m)
	return m.Kind, m.Metadata.Namespace, m.Metadata.Name
}

// Result is the outcome of Convert.
type Result struct {
	Objects []Object
	// Warnings name behaviour changes, per object.
	Warnings []Warning
	// Notes are informational: skipped documents, rewritten workload keys.
	Notes []string
	// Errors are the documents that failed; their objects are not in Objects.
	Errors []error
}

// Messages are the lines to show on stderr: notes, then warnings.
func (r *Result) Messages() []string {
	out := make([]string, 0, len(r.Notes)+len(r.Warnings))
	for _, n := range r.Notes {
		out = append(out, "note: "+n)
	}
	for _, w := range r.Warnings {
		out = append(out, "warning: "+w.String())
	}
	return out
}

// Err joins the per-document errors.
func (r *Result) Err() error { return errors.Join(r.Errors...) }

// Convert converts the documents. Per-document failures are collected in
// Result.Errors so that the caller can stop or, with --continue-on-error,
// print the rest.
func Convert(ctx context.Context, docs []*Document, opts Options) (*Result, error) {
	switch opts.To {
	case "":
		opts.To = ToV1beta1
	case ToV1beta1, ToV1:
	default:
		return nil, fmt.Errorf("--to %q: want v1beta1 or v1", opts.To)
	}
	res := &Result{}
	w := &warnings{}
	fail := func(err error) { res.Errors = append(res.Errors, err) }
	perDoc := map[*Document][]any{}
	var pools []betaNodePool
	var classes []betaNodeClass
	// stage puts a v1beta1 object into the output or, for --to v1, queues it.
	stage := func(d *Document, obj any) {
		if opts.To == ToV1beta1 {
			perDoc[d] = append(perDoc[d], obj)
			return
		}
		switch o := obj.(type) {
		case *v1beta1.NodePool:
			pools = append(pools, betaNodePool{doc: d, obj: o})
		case *v1beta1.EC2NodeClass:
			classes = append(classes, betaNodeClass{doc: d, obj: o})
		}
	}
	considered := 0
	for _, d := range docs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		warn := func(msg string) { w.add(d, msg) }
		switch {
		case d.APIVersion == v1alpha5.APIVersion && d.Kind == v1alpha5.ProvisionerKind:
			considered++
			var p v1alpha5.Provisioner
			if err := decodeStrict(d, &p); err != nil {
				fail(err)
				continue
			}
			np, nc, err := provisionerToNodePool(d, &p, opts.IgnoreDefaults, warn)
			if err != nil {
				fail(err)
				continue
			}
			stage(d, np)
			if nc != nil {
				stage(d, nc)
			}
		case d.APIVersion == v1alpha5.AWSAPIVersion && d.Kind == v1alpha5.AWSNodeTemplateKind:
			considered++
			var t v1alpha5.AWSNodeTemplate
			if err := decodeStrict(d, &t); err != nil {
				fail(err)
				continue
			}
			nc, err := awsToEC2NodeClass(t.ObjectMeta, t.Spec, warn)
			if err != nil {
				fail(&Error{Doc: d, Err: err})
				continue
			}
			stage(d, nc)
		case opts.To == ToV1 && d.APIVersion == v1beta1.APIVersion && d.Kind == v1beta1.NodePoolKind:
			considered++
			var np v1beta1.NodePool
			if err := decodeStrict(d, &np); err != nil {
				fail(err)
				continue
			}
			stage(d, &np)
		case opts.To == ToV1 && d.APIVersion == v1beta1.AWSAPIVersion && d.Kind == v1beta1.EC2NodeClassKind:
			considered++
			var nc v1beta1.EC2NodeClass
			if err := decodeStrict(d, &nc); err != nil {
				fail(err)
				continue
			}
			stage(d, &nc)
		case opts.Workloads && isWorkload(d):
			considered++
			obj, changes, err := rewriteWorkload(d)
			if err != nil {
				fail(err)
				continue
			}
			for _, c := range changes {
				res.Notes = append(res.Notes, fmt.Sprintf("%s: %s", d, c))
			}
			perDoc[d] = append(perDoc[d], obj)
		default:
			why := fmt.Sprintf("%s %s is not converted", d.APIVersion, d.Kind)
			switch {
			case strings.HasPrefix(d.APIVersion, "karpenter.") && (d.Kind == v1beta1.NodePoolKind || d.Kind == v1beta1.EC2NodeClassKind):
				why += fmt.Sprintf(" (already at or past --to %s)", opts.To)
			case !opts.Workloads && isWorkload(d):
				why += " (pass --workloads to rewrite legacy Karpenter keys in workloads)"
			}
			if opts.Strict {
				fail(&Error{Doc: d, Err: fmt.Errorf("%s; remove it from the input or drop --strict", why)})
				continue
			}
			res.Notes = append(res.Notes, fmt.Sprintf("skipping %s: %s", d, why))
		}
	}
	if opts.To == ToV1 {
		for d, objs := range toV1(pools, classes, w, fail) {
			perDoc[d] = append(perDoc[d], objs...)
		}
	}
	for _, d := range docs {
		for _, o := range perDoc[d] {
			res.Objects = append(res.Objects, Object{Source: d, Value: o})
		}
	}
	res.Warnings = w.list
	if considered == 0 && len(res.Errors) == 0 {
		kinds := "Provisioner or AWSNodeTemplate"
		if opts.To == ToV1 {
			kinds = "Provisioner, AWSNodeTemplate, v1beta1 NodePool or v1beta1 EC2NodeClass"
		}
		return res, fmt.Errorf("no objects passed to convert: the input has no %s documents", kinds)
	}
	return res, nil
}

// Encode prints objects as YAML (keys sorted, "---" between documents, as
// kubectl and karpenter-convert print) or as JSON (4-space indent, one
// object after the other).
func Encode(objs []Object, format string) ([]byte, error) {
	var buf bytes.Buffer
	for i, o := range objs {
		b, err := encodeOne(o.Value, format)
		if err != nil {
			return nil, err
		}
		if i > 0 && format != "json" {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	return buf.Bytes(), nil
}

func encodeOne(v any, format string) ([]byte, error) {
	switch format {
	case "", "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("render YAML: %w", err)
		}
		return b, nil
	case "json":
		b, err := json.MarshalIndent(v, "", "    ")
		if err != nil {
			return nil, fmt.Errorf("render JSON: %w", err)
		}
		return append(b, '\n'), nil
	}
	return nil, fmt.Errorf("-o %q: want yaml or json", format)
}

// WriteDir writes one file per object into dir (created if missing), each
// atomically, named <kind>-[<namespace>-]<name>.<yaml|json>. All objects are
// rendered before the first write, and two objects that would share a file
// are an error, so a failure leaves no half-written output. It returns the
// paths written.
func WriteDir(ctx context.Context, dir string, objs []Object, format string) ([]string, error) {
	ext := "yaml"
	if format == "json" {
		ext = "json"
	}
	type file struct {
		path string
		data []byte
	}
	var files []file
	seen := map[string]*Document{}
	for _, o := range objs {
		kind, ns, name := o.meta()
		base := strings.ToLower(kind)
		if ns != "" {
			base += "-" + ns
		}
		base += "-" + name + "." + ext
		if strings.ContainsAny(base, `/\`) || name == "" {
			return nil, fmt.Errorf("%s: cannot make a file name from %s %q", o.Source, kind, name)
		}
		if prev, ok := seen[base]; ok {
			return nil, fmt.Errorf("%s and %s both produce %s %q; --output-dir needs unique names", prev, o.Source, kind, name)
		}
		seen[base] = o.Source
		b, err := encodeOne(o.Value, format)
		if err != nil {
			return nil, err
		}
		files = append(files, file{path: filepath.Join(dir, base), data: b})
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("--output-dir %s: %w", dir, err)
	}
	var written []string
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return written, err
		}
		if err := atomicfile.WriteFile(f.path, f.data, 0o644); err != nil {
			return written, fmt.Errorf("write %s: %w", f.path, err)
		}
		written = append(written, f.path)
	}
	return written, nil
}
