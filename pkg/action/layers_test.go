package action

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
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
		"pkg/generate", "pkg/readiness", "pkg/discover", "pkg/convert", "pkg/config",
		"internal/testenv", "internal/motoenv"}},
	{"the engine", []string{"pkg/engine/disruption", "pkg/engine", "pkg/engine/fidelity"}},
	{"the model", []string{"pkg/catalog", "pkg/catalog/internal/gen", "pkg/inventory", "pkg/apis/v1", "pkg/apis/v1alpha5", "pkg/apis/v1beta1",
		"pkg/apis/internal/schematest", "overlays", "pkg/atomicfile", "pkg/version", "pkg/iostreams"}},
}

// TestLayers keeps the package graph a straight line (go list's imports,
// tests aside): it fails naming the package that imports one above it, or
// a package no layer places. It also keeps pkg/plan free of clients.
func TestLayers(t *testing.T) {
	const module = "github.com/karpenter-migrate/karpenter-migrate/"
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
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
		seen++
		pkg := strings.TrimPrefix(p.ImportPath, module)
		at, ok := layer[pkg]
		if !ok {
			t.Errorf("%s is in no layer: place it in pkg/action's layers (and docs/ARCHITECTURE.md)", pkg)
			continue
		}
		for _, imp := range p.Imports {
			if pkg == "pkg/plan" && (strings.HasPrefix(imp, "k8s.io/client-go/") || strings.HasPrefix(imp, "github.com/aws/aws-sdk-go-v2/service/")) {
				t.Errorf("pkg/plan imports %s: the planner holds no client; its caller gives it the inventory", imp)
			}
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
		t.Fatalf("go list listed %d packages; the layers name %d", seen, len(layer))
	}
}
