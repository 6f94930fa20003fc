package ticketing

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
	"time"
)

// protocolConstants is the "constants" section of testdata/vectors.json,
// written from package wire by its generator.
type protocolConstants struct {
	Limits     map[string]int `json:"limits"`
	ErrorCodes []struct {
		Code int    `json:"code"`
		Name string `json:"name"`
		Text string `json:"text"`
	} `json:"error_codes"`
	CapacityReasons  []namedValue `json:"capacity_reasons"`
	ForbiddenReasons []namedValue `json:"forbidden_reasons"`
}

type namedValue struct {
	Value int    `json:"value"`
	Name  string `json:"name"`
}

func readProtocolConstants(t *testing.T) protocolConstants {
	t.Helper()
	data, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Constants protocolConstants `json:"constants"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("testdata/vectors.json: %v", err)
	}
	if len(f.Constants.ErrorCodes) == 0 {
		t.Fatal("testdata/vectors.json has no constants section; go test ./internal/wire -run TestVectors -update writes it")
	}
	return f.Constants
}

// exportedFromWire parses the package's errors.go and returns, for each
// constant of type typ, the package wire constant it is converted from:
// CodeMalformedFrame -> CodeMalformedFrame for `CodeMalformedFrame =
// ErrorCode(wire.CodeMalformedFrame)`, "" for a constant with its own value.
func exportedFromWire(t *testing.T, typ string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, sp := range gd.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if id, ok := vs.Type.(*ast.Ident); ok && id.Name == typ {
					out[n.Name] = "" // a value of its own: a second definition
					continue
				}
				if i >= len(vs.Values) {
					continue
				}
				call, ok := vs.Values[i].(*ast.CallExpr)
				if !ok || len(call.Args) != 1 {
					continue
				}
				if fn, ok := call.Fun.(*ast.Ident); !ok || fn.Name != typ {
					continue
				}
				out[n.Name] = ""
				if sel, ok := call.Args[0].(*ast.SelectorExpr); ok {
					if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "wire" {
						out[n.Name] = sel.Sel.Name
					}
				}
			}
		}
	}
	return out
}

// goName is the Go spelling of a neutral name: duplicate_id matches
// DuplicateID, compared without case.
func sameName(neutral, goName string) bool {
	return strings.EqualFold(strings.ReplaceAll(neutral, "_", ""), goName)
}

// checkExported requires, for every entry of the file, one exported constant
// prefix+Name converted from package wire's constant of that name, and no
// exported constant of the type that the file does not list.
func checkExported(t *testing.T, typ, prefix, wirePrefix string, names []string) {
	t.Helper()
	exported := exportedFromWire(t, typ)
	for _, name := range names {
		found := false
		for goName, from := range exported {
			if !sameName(name, strings.TrimPrefix(goName, prefix)) {
				continue
			}
			found = true
			if !sameName(name, strings.TrimPrefix(from, wirePrefix)) {
				t.Errorf("%s is not %s(wire.%s%s): define it from package wire, not by value", goName, typ, wirePrefix, goName[len(prefix):])
			}
			delete(exported, goName)
		}
		if !found {
			t.Errorf("the protocol's %s %q has no exported %s constant", typ, name, typ)
		}
	}
	for goName := range exported {
		t.Errorf("%s %s is not in the protocol's constants (testdata/vectors.json)", typ, goName)
	}
}

// The exported protocol constants are package wire's, one for every entry of
// the constants section of testdata/vectors.json and no other.
func TestConstantsMatchProtocol(t *testing.T) {
	c := readProtocolConstants(t)
	var codes []string
	for _, e := range c.ErrorCodes {
		codes = append(codes, e.Name)
		if got := ErrorCode(e.Code).String(); got != e.Text {
			t.Errorf("ErrorCode(%d).String() = %q, the protocol says %q", e.Code, got, e.Text)
		}
	}
	checkExported(t, "ErrorCode", "Code", "Code", codes)
	var capacity []string
	for _, r := range c.CapacityReasons {
		capacity = append(capacity, r.Name)
	}
	checkExported(t, "CapacityReason", "Capacity", "Capacity", capacity)
	var forbidden []string
	for _, r := range c.ForbiddenReasons {
		forbidden = append(forbidden, r.Name)
	}
	checkExported(t, "PermissionReason", "Permission", "Forbidden", forbidden)

	if MaxWait != time.Duration(c.Limits["max_wait_s"])*time.Second || MinLease != time.Duration(c.Limits["min_lease_s"])*time.Second ||
		MaxLease != time.Duration(c.Limits["max_lease_s"])*time.Second || MaxKey != c.Limits["max_key"] {
		t.Errorf("argument limits %v %v %v %v differ from the protocol's %v", MaxWait, MinLease, MaxLease, MaxKey, c.Limits)
	}
}
