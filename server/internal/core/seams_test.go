package core

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCoreStaysBehindItsSeams: the core reaches connections only through
// Replier (no sockets, no server package), Raft only through its ports
// (ReplicatedLog, AppliedState: no node package, no hashicorp/raft), and
// never decodes a request body (the connection's reader decodes and checks
// each one once).
func TestCoreStaysBehindItsSeams(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == "net" || strings.HasSuffix(path, "/server/internal/server") {
				t.Errorf("%s imports %s: the core answers through Replier only", fset.Position(imp.Pos()), path)
			}
			if strings.HasSuffix(path, "/server/internal/node") || strings.HasPrefix(path, "github.com/hashicorp/raft") {
				t.Errorf("%s imports %s: the core reaches Raft through its ports only (ports.go)", fset.Position(imp.Pos()), path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Decode") {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "wire" {
					t.Errorf("%s calls wire.%s: the reader decodes a request once, the core takes it decoded", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
}
