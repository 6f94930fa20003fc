package consoletest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ticketdBin is the ticketd binary TestMain builds, stamped with
// stampedVersion as a release build would be.
var ticketdBin string

const stampedVersion = "v9.9.9-consoletest"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ticketd-consoletest-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "consoletest: temporary directory: %v\n", err)
		os.Exit(1)
	}
	ticketdBin = filepath.Join(dir, "ticketd")
	out, err := exec.Command("go", "build", "-ldflags", "-X main.version="+stampedVersion, "-o", ticketdBin, "github.com/ticketing-io/ticketing/server/cmd/ticketd").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "consoletest: cannot build cmd/ticketd:\n%s%v\n", out, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
