package action

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// layers is the module's package graph as a straight line, top first
// (docs/ARCHITECTURE.md, Layout): a package may import packages of its own
// layer or of a layer below, never one above. The runbook's steps sit
// above the runner because they are written against its primitives
// (rollout.Session) and handed to it (Runner.Steps); the Helm client and
// the sandbox sit beside them, as the runner's collaborators.
var layers = []struct {
	name     string
	packages []string
}{
	{"main", []string{"cmd/karpenter-migrate"}},
	{"front ends", []string{"pkg/cli", "pkg/tui", "pkg/tui/progress", "pkg/demo", "internal/bigcluster", "pkg/rollout/e2e", "scripts"}},
	{"actions", []string{"pkg/action"}},
	{"the runbook's steps and the runner's collaborators", []string{"migrations", "pkg/helm", "internal/sandbox"}},
	{"the runner", []string{"pkg/rollout"}},
	{"the planner", []string{"pkg/plan"}},
	{"the cluster, the account and what is written to them", []string{
		"pkg/kube", "pkg/kube/awsauth", "pkg/aws", "pkg/aws/awsfake", "pkg/aws/awsfake/internal/gennames", "pkg/iam",
		"pkg/iam/desired", "pkg/generate", "pkg/readiness", "pkg/discover", "pkg/convert", "pkg/config",
		"internal/testenv", "internal/motoenv"}},
	{"the engine", []string{"pkg/engine/disruption", "pkg/engine", "pkg/engine/fidelity"}},
	{"the model", []string{"pkg/catalog", "pkg/catalog/internal/gen", "pkg/inventory", "pkg/apis/v1", "pkg/apis/v1alpha5", "pkg/apis/v1beta1",
		"pkg/apis/internal/schematest", "overlays", "pkg/atomicfile", "pkg/version", "pkg/iostreams"}},
}

// clientImports are the packages that talk to a cluster or an account
// (client-go's clientsets, REST and informers, kubectl's drain, the AWS
// SDK and its transport, Helm, controller-runtime). pkg/plan may reach
// none of them, however indirectly: the planner is given the inventory
// and makes a plan from facts alone. Kubernetes API types
// (k8s.io/api, k8s.io/apimachinery) are facts and stay allowed.
var clientImports = []string{
	"k8s.io/client-go/", "k8s.io/kubectl/", "github.com/aws/aws-sdk-go-v2/", "github.com/aws/smithy-go",
	"helm.sh/", "sigs.k8s.io/controller-runtime",
}

// TestLayers keeps the package graph a straight line (go list's imports,
// tests aside): it fails naming the package that imports one above it, or
// a package no layer places. It also keeps pkg/plan's whole dependency set
// free of clients, naming the path by which it reaches one.
func TestLayers(t *testing.T) {
	const module = "github.com/karpenter-migrate/karpenter-migrate/"
	// -deps: every package the module's packages reach, ours and others.
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", "./...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	layer := map[string]int{}
	for i, l := range layers {
		for _, p := range l.packages {
			layer[p] = i
		}
	}
	imports := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		imports[p.ImportPath] = p.Imports
		pkg, ours := strings.CutPrefix(p.ImportPath, module)
		if !ours {
			continue
		}
		seen++
		at, ok := layer[pkg]
		if !ok {
			t.Errorf("%s is in no layer: place it in pkg/action's layers (and docs/ARCHITECTURE.md)", pkg)
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			if l, ok := layer[dep]; ok && l < at {
				t.Errorf("%s (%s) imports %s (%s), a layer above it", pkg, layers[at].name, dep, layers[l].name)
			}
		}
	}
	if seen < len(layer)/2 {
		t.Fatalf("go list listed %d of our packages; the layers name %d", seen, len(layer))
	}
	for _, r := range clientReach(imports, module+"pkg/plan") {
		t.Errorf("pkg/plan reaches clients through %s, which imports %s: the planner holds no client, its caller gives it the inventory",
			strings.ReplaceAll(r.path, module, ""), strings.Join(r.clients, ", "))
	}
}

// reach is a package that imports client packages, and the shortest
// import path to it.
type reach struct {
	path    string
	clients []string
}

// clientReach walks the import graph from root and returns every package
// it reaches that imports a client package directly.
func clientReach(imports map[string][]string, root string) []reach {
	isClient := func(p string) bool {
		return slices.ContainsFunc(clientImports, func(c string) bool { return strings.HasPrefix(p, c) })
	}
	from := map[string]string{root: ""}
	var out []reach
	for queue := []string{root}; len(queue) > 0; queue = queue[1:] {
		p := queue[0]
		var clients []string
		for _, imp := range imports[p] {
			if isClient(imp) {
				clients = append(clients, imp)
				continue
			}
			if _, ok := from[imp]; !ok {
				from[imp] = p
				queue = append(queue, imp)
			}
		}
		if len(clients) > 0 {
			path := p
			for q := from[p]; q != ""; q = from[q] {
				path = q + " → " + path
			}
			out = append(out, reach{path, clients})
		}
	}
	return out
}
