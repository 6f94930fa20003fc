package wire

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The "constants" section of testdata/vectors.json: every frame type, error
// code, reason byte and limit of this package, read from its source (the
// declarations and their comments), so that the clients in other languages
// can check their own definitions against one list. A constant added here
// appears in the file at the next -update, and every client's check then
// fails until that client defines it too.

// declaredConst is one constant declaration as written in this package.
type declaredConst struct {
	goName  string // e.g. CodeMalformedFrame
	typ     string // the declared type: Code, Type, uint8
	value   string // the literal: 1, 'H'
	comment string // the trailing or leading comment, without the slashes
}

// declaredConsts parses the package's non-test files and returns its
// constants with literal values, in source order.
func declaredConsts(t testing.TB) []declaredConst {
	t.Helper()
	fset := token.NewFileSet()
	var out []declaredConst
	for _, file := range []string{"wire.go", "errors.go", "coord.go"} {
		f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				if len(vs.Names) != 1 || len(vs.Values) != 1 {
					continue
				}
				lit, ok := vs.Values[0].(*ast.BasicLit)
				if !ok {
					continue
				}
				typ := ""
				if id, ok := vs.Type.(*ast.Ident); ok {
					typ = id.Name
				}
				comment := vs.Comment.Text()
				if comment == "" {
					comment = vs.Doc.Text()
				}
				out = append(out, declaredConst{goName: vs.Names[0].Name, typ: typ, value: lit.Value,
					comment: strings.Join(strings.Fields(comment), " ")})
			}
		}
	}
	return out
}

// snakeName turns a Go name without its prefix into the file's neutral
// name: MalformedFrame -> malformed_frame, DuplicateID -> duplicate_id.
func snakeName(goName string) string {
	var b strings.Builder
	rs := []rune(goName)
	for i, r := range rs {
		if unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]))) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// constantsObject is the "constants" section.
func constantsObject(t testing.TB) object {
	consts := declaredConsts(t)
	pick := func(typ, prefix string) []declaredConst {
		var out []declaredConst
		for _, c := range consts {
			if c.typ == typ && strings.HasPrefix(c.goName, prefix) {
				out = append(out, c)
			}
		}
		return out
	}
	num := func(c declaredConst) int {
		n, err := strconv.Atoi(c.value)
		if err != nil {
			t.Fatalf("%s = %s is not a decimal literal", c.goName, c.value)
		}
		return n
	}

	var types []object
	for _, c := range pick("Type", "Type") {
		letter, err := strconv.Unquote(c.value)
		if err != nil || len(letter) != 1 {
			t.Fatalf("%s = %s is not a one-letter rune literal", c.goName, c.value)
		}
		typ := Type(letter[0])
		dir := directionOf(typ)
		scope := "tickets"
		switch typ {
		case TypeCoord:
			dir, scope = "client->server", "coordination"
		case TypeCoordReply:
			dir, scope = "server->client", "coordination"
		}
		types = append(types, object{{"letter", letter}, {"name", snakeName(strings.TrimPrefix(c.goName, "Type"))},
			{"direction", dir}, {"scope", scope}})
	}

	var codes []object
	for _, c := range pick("Code", "Code") {
		n := num(c)
		codes = append(codes, object{{"code", n}, {"name", snakeName(strings.TrimPrefix(c.goName, "Code"))},
			{"text", Code(n).String()}, {"meaning", c.comment}})
	}

	reasons := func(prefix string) []object {
		var out []object
		for _, c := range pick("uint8", prefix) {
			out = append(out, object{{"value", num(c)}, {"name", snakeName(strings.TrimPrefix(c.goName, prefix))},
				{"meaning", c.comment}})
		}
		return out
	}

	limits := object{
		{"version", Version},
		{"header_len", HeaderLen},
		{"max_frame", MaxFrame},
		{"max_coord_frame", MaxCoordFrame},
		{"max_key", MaxKey},
		{"max_token", MaxToken},
		{"max_wait_s", MaxWait},
		{"min_lease_s", MinLease},
		{"max_lease_s", MaxLease},
		{"owner_len", OwnerLen},
		{"cluster_id_len", ClusterIDLen},
	}
	flags := object{
		{"hello_admin", HelloAdmin},
		{"hello_cluster_id", HelloClusterID},
		{"hello_idle_pings", HelloIdlePings},
		{"ready_leader", ReadyLeader},
		{"ready_sessions", ReadySessions},
		{"ready_cluster_id", ReadyClusterID},
		{"ready_idle_pings", ReadyIdlePings},
		{"info_held", InfoHeld},
	}
	return object{
		{"limits", limits},
		{"flags", flags},
		{"frame_types", types},
		{"error_codes", codes},
		{"capacity_reasons", reasons("Capacity")},
		{"forbidden_reasons", reasons("Forbidden")},
	}
}

// fileConstants is the "constants" section as read back.
type fileConstants struct {
	Limits     map[string]int `json:"limits"`
	Flags      map[string]int `json:"flags"`
	FrameTypes []struct {
		Letter    string `json:"letter"`
		Name      string `json:"name"`
		Direction string `json:"direction"`
		Scope     string `json:"scope"`
	} `json:"frame_types"`
	ErrorCodes []struct {
		Code    int    `json:"code"`
		Name    string `json:"name"`
		Text    string `json:"text"`
		Meaning string `json:"meaning"`
	} `json:"error_codes"`
	CapacityReasons  []fileReason `json:"capacity_reasons"`
	ForbiddenReasons []fileReason `json:"forbidden_reasons"`
}

type fileReason struct {
	Value   int    `json:"value"`
	Name    string `json:"name"`
	Meaning string `json:"meaning"`
}

// TestConstantsSection checks the codec against the file's constants: every
// code's text is what Code.String says, every code the codec names is in
// the file and no two entries share a value or a name.
func TestConstantsSection(t *testing.T) {
	c := readFile(t).Constants
	if len(c.ErrorCodes) == 0 || len(c.FrameTypes) == 0 || len(c.CapacityReasons) == 0 || len(c.ForbiddenReasons) == 0 {
		t.Fatalf("%s: constants section incomplete", vectorsPath)
	}
	seen := map[string]bool{}
	for _, e := range c.ErrorCodes {
		if got := Code(e.Code).String(); got != e.Text {
			t.Errorf("code %d: String() = %q, file says %q", e.Code, got, e.Text)
		}
		if e.Meaning == "" {
			t.Errorf("code %d (%s) has no meaning in the file", e.Code, e.Name)
		}
		for _, k := range []string{fmt.Sprint("code ", e.Code), "name " + e.Name} {
			if seen[k] {
				t.Errorf("error codes: %s twice", k)
			}
			seen[k] = true
		}
	}
	for code := range codeNames {
		if !seen[fmt.Sprint("code ", int(code))] {
			t.Errorf("code %d (%s) is named by the codec but missing from the file", code, code)
		}
	}
	for _, ft := range c.FrameTypes {
		if seen["type "+ft.Letter] {
			t.Errorf("frame type %s twice", ft.Letter)
		}
		seen["type "+ft.Letter] = true
		if ft.Scope == "tickets" && layoutOf(Type(ft.Letter[0])) == nil {
			t.Errorf("frame type %s (%s) has no layout", ft.Letter, ft.Name)
		}
	}
	for _, l := range layouts {
		if !seen["type "+l.typ.String()] {
			t.Errorf("frame type %s has a layout but is missing from the file", l.typ)
		}
	}
	if c.Limits["max_key"] != MaxKey || c.Limits["max_frame"] != MaxFrame || c.Limits["version"] != int(Version) {
		t.Errorf("limits %v differ from the codec", c.Limits)
	}

	// docs/protocol.md's tables of codes and reasons list the same entries:
	// one row "| value | `GoName` |" each.
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	docRow := func(what string, value int, goName string) {
		row := regexp.MustCompile(fmt.Sprintf("(?m)^\\| %d \\| `([A-Za-z]+)` \\|", value))
		var names []string
		for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
			names = append(names, m[1])
			if strings.EqualFold(m[1], goName) {
				return
			}
		}
		t.Errorf("%s: %s %d (%s) has no row in its table (rows with %d: %v)", docPath, what, value, goName, value, names)
	}
	for _, e := range c.ErrorCodes {
		docRow("error code", e.Code, strings.ReplaceAll(e.Name, "_", ""))
	}
	for _, r := range c.CapacityReasons {
		docRow("capacity reason", r.Value, "Capacity"+strings.ReplaceAll(r.Name, "_", ""))
	}
	for _, r := range c.ForbiddenReasons {
		docRow("refusal reason", r.Value, "Forbidden"+strings.ReplaceAll(r.Name, "_", ""))
	}
}
