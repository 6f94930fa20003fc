package ticketing

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The public error types are aliases of the connection layer's types, whose
// fields go doc does not show under this package: each alias's comment
// draws its struct instead. TestAliasDocsShowTheFields keeps those drawings
// true: the fields drawn are the type's, in order.
func TestAliasDocsShowTheFields(t *testing.T) {
	types := map[string]reflect.Type{
		"PermissionError":    reflect.TypeFor[PermissionError](),
		"IndeterminateError": reflect.TypeFor[IndeterminateError](),
		"ServerError":        reflect.TypeFor[ServerError](),
		"CapacityError":      reflect.TypeFor[CapacityError](),
		"NotLeaderError":     reflect.TypeFor[NotLeaderError](),
		"AdminError":         reflect.TypeFor[AdminError](),
		"WrongClusterError":  reflect.TypeFor[WrongClusterError](),
	}
	drawn := map[string][]string{}
	fset := token.NewFileSet()
	field := regexp.MustCompile(`^\s+([A-Z]\w*)\s`)
	for _, file := range []string{"errors.go", "cluster.go"} {
		f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE || gd.Doc == nil {
				continue
			}
			name := gd.Specs[0].(*ast.TypeSpec).Name.Name
			_, body, ok := strings.Cut(gd.Doc.Text(), "type "+name+" struct {")
			if !ok {
				continue
			}
			body, _, _ = strings.Cut(body, "}")
			drawn[name] = []string{}
			for _, line := range strings.Split(body, "\n") {
				if m := field.FindStringSubmatch(line); m != nil {
					drawn[name] = append(drawn[name], m[1])
				}
			}
		}
	}
	for name, typ := range types {
		var fields []string
		for i := range typ.NumField() {
			if typ.Field(i).IsExported() {
				fields = append(fields, typ.Field(i).Name)
			}
		}
		got, ok := drawn[name]
		if !ok {
			t.Errorf("%s: its comment draws no struct (type %s struct { ... })", name, name)
			continue
		}
		if !slices.Equal(got, fields) {
			t.Errorf("%s: its comment draws the fields %v, the type has %v", name, got, fields)
		}
	}
}
