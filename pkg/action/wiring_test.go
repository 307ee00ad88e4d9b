package action

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyActionsWire keeps pkg/action the one place the pipeline is
// assembled. It reads every non-test Go file of the module and fails,
// naming the file and line, where
//   - any package but pkg/action (and the defining one) builds a rollout
//     Runner or iam.Clients, or calls discover.Run or reads the runbook's
//     registry (migrations.All, Planned);
//   - a front end (the CLI, the wizard, the demo) calls a pipeline function
//     the actions wrap (generate, IAM plan/apply/delete, plan, status,
//     readiness, the engine, consolidation) instead of the action;
//   - the CLI or the wizard builds a Kubernetes or AWS client. (The demo
//     reads the sandbox through its clients to judge the outcome on its
//     own, as pdbwatch does; it builds none for the pipeline.)
func TestOnlyActionsWire(t *testing.T) {
	const module = "github.com/karpenter-migrate/karpenter-migrate/"
	frontEnds := []string{"pkg/cli", "pkg/tui", "pkg/demo"}
	clientBuilders := []string{"pkg/cli", "pkg/tui"}
	type rule struct {
		kind  string // "literal" or "call"
		names []string
		in    []string // the directories it applies to; nil: the module
	}
	rules := map[string]rule{
		module + "pkg/rollout":  {"literal", []string{"Runner"}, nil},
		module + "pkg/iam":      {"literal", []string{"Clients"}, nil},
		module + "pkg/discover": {"call", []string{"Run"}, nil},
		// The runbook's registry is handed to the runner and the planner
		// here only (Runner.Steps, PlanRequest.Steps).
		module + "migrations": {"call", []string{"All", "Planned"}, nil},
	}
	calls := map[string][]string{
		module + "pkg/generate":          {"Run", "Generate", "Write"},
		module + "pkg/iam":               {"BuildPlan", "Apply", "Down", "ReadJournal"},
		module + "pkg/iam/desired":       {"Build"},
		module + "pkg/plan":              {"MakePlan", "BuildPlan"},
		module + "pkg/rollout":           {"Status"},
		module + "pkg/readiness":         {"Evaluate", "FromNodePools"},
		module + "pkg/engine":            {"Solve"},
		module + "pkg/engine/disruption": {"Decide", "Settle", "FromInventory", "Validate"},
		module + "pkg/aws":               {"NewClients", "LoadConfig"},
		"k8s.io/client-go/kubernetes":    {"NewForConfig"},
		"k8s.io/client-go/dynamic":       {"NewForConfig"},
	}
	// calls[p] adds to the front ends' rules; the module-wide literal rule
	// of the same package stays in force (checked separately below).
	frontRules := map[string]rule{}
	for p, names := range calls {
		in := frontEnds
		if !strings.HasPrefix(p, module) {
			in = clientBuilders
		}
		frontRules[p] = rule{"call", names, in}
	}
	awsService := "github.com/aws/aws-sdk-go-v2/service/"

	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		dir := filepath.ToSlash(filepath.Dir(rel))
		if dir == "pkg/action" {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		applies := func(r rule) bool {
			if r.in == nil {
				return true
			}
			for _, d := range r.in {
				if dir == d || strings.HasPrefix(dir, d+"/") {
					return true
				}
			}
			return false
		}
		local := map[string][]rule{} // import name -> rules in force
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if module+dir == p {
				continue
			}
			var rs []rule
			for _, r := range []rule{rules[p], frontRules[p]} {
				if r.kind != "" && applies(r) {
					rs = append(rs, r)
				}
			}
			if strings.HasPrefix(p, awsService) && applies(rule{in: clientBuilders}) {
				rs = append(rs, rule{"call", []string{"NewFromConfig"}, clientBuilders})
			}
			if len(rs) == 0 {
				continue
			}
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			local[name] = append(local[name], rs...)
		}
		if len(local) == 0 {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var sel *ast.SelectorExpr
			var kind string
			switch n := n.(type) {
			case *ast.CompositeLit:
				sel, _ = n.Type.(*ast.SelectorExpr)
				kind = "literal"
			case *ast.CallExpr:
				sel, _ = n.Fun.(*ast.SelectorExpr)
				kind = "call"
			}
			if sel == nil {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			for _, r := range local[id.Name] {
				if r.kind == kind && slices.Contains(r.names, sel.Sel.Name) {
					t.Errorf("%s: %s.%s outside pkg/action: use the action (action.Configuration and its verbs)", fset.Position(sel.Pos()), id.Name, sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked %d files: the walk no longer reaches the module", checked)
	}
}
