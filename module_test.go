package ticketing

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestClientModuleRequiresNoServerDependency: the client module (client,
// retry, fence, coordination) requires nothing but the standard library and
// a test-only leak checker, so a Go user who imports the client pulls no
// server, Raft, metrics or database-driver module into their build. The
// server, its tools and every test needing them live in ./server, and
// native pgx support in ./fence/pgxfence.
func TestClientModuleRequiresNoServerDependency(t *testing.T) {
	data, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range goModProblems(string(data)) {
		t.Error(p)
	}
	// The check itself can fail.
	bad := "module m\n\ngo 1.26.8\n\nrequire (\n\tgithub.com/hashicorp/raft v1.8.0\n)\n"
	if p := goModProblems(bad); len(p) != 2 {
		t.Errorf("a go.mod requiring raft at go 1.26.8 gave %q", p)
	}
}

// goModProblems lists what in a go.mod breaks the client module's promise.
func goModProblems(data string) (problems []string) {
	allowed := map[string]bool{
		"go.uber.org/goleak":          true, // tests only
		"github.com/stretchr/testify": true, // goleak's own requirement
	}
	inBlock := false
	for _, line := range strings.Split(data, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case f[0] == "require" && len(f) > 1 && f[1] == "(":
			inBlock = true
		case inBlock && f[0] == ")":
			inBlock = false
		case f[0] == "require" || inBlock:
			mod := f[0]
			if mod == "require" {
				mod = f[1]
			}
			if !allowed[mod] {
				problems = append(problems, fmt.Sprintf("go.mod requires %s: the client module must not depend on it (move the code or test that needs it to the server module)", mod))
			}
		case f[0] == "go" && len(f) > 1 && strings.Count(f[1], ".") > 1 && !strings.HasSuffix(f[1], ".0"):
			problems = append(problems, fmt.Sprintf("go directive %s names a patch release: users would need that toolchain or later", f[1]))
		}
	}
	return problems
}
