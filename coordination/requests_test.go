package coordination

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// TestSDKSendsEveryRequest: the SDK's code names every request sub-op the
// wire defines, so that an operation added to the protocol (and the
// server) without its call here fails. The calls themselves are tested
// against real servers in server/internal/testsupport/coordtest.
func TestSDKSendsEveryRequest(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "wire" {
					used[sel.Sel.Name] = true
				}
			}
			return true
		})
	}
	for _, r := range wire.CoordRequests() {
		if !used["Coord"+r.Name] {
			t.Errorf("request %s (sub-op %d): the SDK never uses wire.Coord%s; add the call that sends it", r.Name, r.Op, r.Name)
		}
	}
}
