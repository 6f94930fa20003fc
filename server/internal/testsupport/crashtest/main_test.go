package crashtest

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ticketdBin and ticketctlBin are the binaries built by TestMain.
var ticketdBin, ticketctlBin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Every test here starts processes; -short skips them all (and the build).
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "ticketd-crashtest-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "crashtest: temporary directory for the ticketd binary: %v\n", err)
		os.Exit(1)
	}
	ticketdBin = filepath.Join(dir, "ticketd")
	ticketctlBin = filepath.Join(dir, "ticketctl")
	// One err for both builds: a failed build must stop the run.
	if err = buildTicketd(ticketdBin); err == nil {
		err = build(ticketctlBin, "github.com/ticketing-io/ticketing/server/cmd/ticketctl")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "crashtest: cannot build cmd/ticketd and cmd/ticketctl, so no crash test can run:\n%v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if lastBoltBuild.dir != "" {
		os.RemoveAll(lastBoltBuild.dir)
	}
	os.Exit(code)
}

func buildTicketd(out string) error {
	return build(out, "github.com/ticketing-io/ticketing/server/cmd/ticketd")
}

func build(out, pkg string) error {
	gotool, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			gotool = filepath.Join(root, "bin", "go")
		} else {
			return fmt.Errorf("the go command is not on PATH: %w", err)
		}
	}
	args := []string{"build", "-o", out}
	if os.Getenv("TICKETING_CRASH_RACE") != "" {
		args = append(args, "-race")
	}
	args = append(args, pkg)
	cmd := exec.Command(gotool, args...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", gotool, strings.Join(args, " "), err, b)
	}
	return nil
}
