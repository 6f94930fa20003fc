package consoletest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ticketdBin is the ticketd binary TestMain builds.
var ticketdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ticketd-consoletest-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "consoletest: temporary directory: %v\n", err)
		os.Exit(1)
	}
	ticketdBin = filepath.Join(dir, "ticketd")
	out, err := exec.Command("go", "build", "-o", ticketdBin, "github.com/ticketing-io/ticketing/server/cmd/ticketd").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "consoletest: cannot build cmd/ticketd:\n%s%v\n", out, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
