package fencetest_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// documentedOutput is what the comment of the fence package's Example says
// it prints: the tab-indented lines after "It prints:".
func documentedOutput(src string) ([]string, error) {
	_, rest, ok := strings.Cut(src, "// It prints:\n")
	if !ok {
		_, rest, ok = strings.Cut(src, " It prints:\n")
	}
	if !ok {
		return nil, errors.New(`no "It prints:" in the comment of the fence package's Example`)
	}
	var out []string
	for _, line := range strings.Split(rest, "\n") {
		text, comment := strings.CutPrefix(line, "//")
		if !comment {
			break
		}
		if printed, ok := strings.CutPrefix(text, "\t"); ok {
			out = append(out, printed)
		}
	}
	if len(out) == 0 {
		return nil, errors.New(`no output lines after "It prints:"`)
	}
	return out, nil
}

// The fence package's Example, the one its documentation shows, runs here
// with the SQLite driver, which the client module may not import: go test
// runs the fence package with the example given the Output its comment
// documents, and a file importing the driver laid over the package
// (-overlay). The example that is read is the one that runs.
func TestFenceExampleRunsAsDocumented(t *testing.T) {
	const pkg = "github.com/ticketing-io/ticketing/fence"
	dirOut, err := exec.Command("go", "list", "-f", "{{.Dir}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	dir := strings.TrimSpace(string(dirOut))
	src, err := os.ReadFile(filepath.Join(dir, "example_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := documentedOutput(string(src))
	if err != nil {
		t.Fatal(err)
	}
	body := strings.TrimRight(string(src), "\n")
	if !strings.HasSuffix(body, "}") {
		t.Fatal("the fence package's example_test.go does not end with its Example's closing brace")
	}
	withOutput := body[:len(body)-1] + "\t// Output:\n\t// " + strings.Join(want, "\n\t// ") + "\n}\n"
	tmp := t.TempDir()
	files := map[string]string{
		"example_test.go":       withOutput,
		"sqlite_driver_test.go": "package fence_test\n\nimport _ \"modernc.org/sqlite\"\n",
	}
	replace := map[string]string{}
	for name, text := range files {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		replace[filepath.Join(dir, name)] = p
	}
	overlay, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	overlayFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "test", "-overlay", overlayFile, "-count=1", "-v", "-run", "^Example$", pkg).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: Example ") {
		t.Fatalf("the fence package's Example with SQLite does not print what its comment says (%v):\n%s", err, out)
	}
}
