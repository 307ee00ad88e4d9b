package action

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyActionsWire keeps pkg/action the one place that builds a rollout
// Runner, iam.Clients or calls discover.Run: it reads every non-test Go file
// of the module and fails naming the file and line of any other.
func TestOnlyActionsWire(t *testing.T) {
	const module = "github.com/karpenter-migrate/karpenter-migrate/"
	// What only pkg/action may do, by the package that defines it; that
	// package itself is exempt.
	wiring := map[string]map[string]string{
		module + "pkg/rollout":  {"Runner": "literal"},
		module + "pkg/iam":      {"Clients": "literal"},
		module + "pkg/discover": {"Run": "call"},
	}
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
		local := map[string]map[string]string{} // import name -> wiring
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			w, ok := wiring[p]
			if !ok || module+dir == p {
				continue
			}
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			local[name] = w
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
			if id, ok := sel.X.(*ast.Ident); ok && local[id.Name][sel.Sel.Name] == kind {
				t.Errorf("%s: %s.%s outside pkg/action: use action.Configuration (Runner, IAMClients, Discover)", fset.Position(sel.Pos()), id.Name, sel.Sel.Name)
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
