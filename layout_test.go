package ticketing

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestReadmeLayoutMatchesTree: the table of README.md's "Layout" section
// names every directory holding Go code, once, and no path that does not
// exist, so that a newcomer finds every package there. A directory of its
// own module that the table names (bench/etcd) covers the directories
// inside it.
func TestReadmeLayoutMatchesTree(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	listed, err := layoutPaths(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := goDirs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range layoutProblems(listed, dirs, ".") {
		t.Error(p)
	}

	// The check itself can fail: a package missing from the table, a row
	// naming a directory that does not exist, a directory named twice.
	bad := "\n## Layout\n\n| path | what |\n|---|---|\n| `internal/wire`, `internal/gone` | x |\n| `internal/wire` | again |\n"
	l, err := layoutPaths(bad)
	if err != nil {
		t.Fatal(err)
	}
	if p := layoutProblems(l, []string{"internal/wire", "internal/hellodiag"}, "."); len(p) != 3 ||
		!strings.Contains(p[2], "| `internal/hellodiag` | ") {
		t.Errorf("the check of a table that misses one, names a missing one and one twice gave %q", p)
	}
}

// layoutRow is one directory named in the first column of the table.
type layoutRow struct {
	path, row string
}

var backticked = regexp.MustCompile("`([^`]+)`")

// layoutPaths returns the directories named (in backticks) in the first
// column of the table of the "## Layout" section.
func layoutPaths(readme string) ([]layoutRow, error) {
	_, section, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		return nil, fmt.Errorf("README.md has no \"## Layout\" section")
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var out []layoutRow
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 3 {
			continue
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			out = append(out, layoutRow{path: m[1], row: line})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("README.md, Layout: no table rows naming directories in backticks")
	}
	return out, nil
}

// goDirs lists the directories below root that hold .go files, as
// slash-separated paths ("." for root itself), leaving out testdata,
// hidden directories and the other languages' clients.
func goDirs(root string) ([]string, error) {
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || path == filepath.Join(root, "clients")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(root, filepath.Dir(path))
			if err != nil {
				return err
			}
			seen[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out, err
}

// layoutProblems compares the directories the table names with those that
// hold Go code under root; each problem says what to change in README.md.
func layoutProblems(listed []layoutRow, dirs []string, root string) (problems []string) {
	named := map[string]string{}
	for _, r := range listed {
		if first, twice := named[r.path]; twice {
			problems = append(problems, fmt.Sprintf("README.md, Layout: `%s` is named in two rows; keep it in one:\n%s\n%s", r.path, first, r.row))
			continue
		}
		named[r.path] = r.row
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(r.path))); err != nil {
			problems = append(problems, fmt.Sprintf("README.md, Layout: `%s` is not in the tree; remove it from this row (or correct its path):\n%s", r.path, r.row))
		}
	}
	// A directory with its own go.mod that the table names stands for all
	// of its module.
	covered := func(dir string) bool {
		for d := dir; d != "."; d = pathDir(d) {
			if _, ok := named[d]; ok {
				if d == dir {
					return true
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(d), "go.mod")); err == nil {
					return true
				}
			}
		}
		_, ok := named[dir]
		return ok
	}
	for _, d := range dirs {
		if !covered(d) {
			problems = append(problems, fmt.Sprintf("README.md, Layout: %s holds Go code but is not listed; add this row to the table (and say what it holds in your own words if this is not it):\n| `%s` | %s |", d, d, packageSummary(filepath.Join(root, filepath.FromSlash(d)))))
		}
	}
	return problems
}

// pathDir is path.Dir for slash-separated relative paths, "." at the top.
func pathDir(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[:i]
	}
	return "."
}

// packageSummary is the first sentence of the package documentation in
// dir, without its "Package x" or "Command x" opening.
func packageSummary(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "what it holds"
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil || f.Doc == nil {
			continue
		}
		doc := strings.Join(strings.Fields(f.Doc.Text()), " ")
		if i := strings.Index(doc, ". "); i >= 0 {
			doc = doc[:i]
		}
		doc = strings.TrimSuffix(doc, ".")
		for _, opening := range []string{"Package " + f.Name.Name + " ", "Command " + filepath.Base(dir) + " "} {
			doc = strings.TrimPrefix(doc, opening)
		}
		return strings.TrimPrefix(doc, "is ")
	}
	return "what it holds"
}
