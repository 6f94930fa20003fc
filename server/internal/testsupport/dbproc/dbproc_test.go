package dbproc

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A server whose port was taken before it bound it is started again on
// another port, in the same directory; Stop then ends it and deletes the
// directory. The stand-in server is a shell: its first run says what
// PostgreSQL says of a taken port and exits, its second runs until stopped.
func TestLaunchTriesAnotherPortWhenTaken(t *testing.T) {
	dir, err := TempDir("dbproc-test-", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var ports []int
	p, err := Launch(Spec{Name: "stand-in", Dir: dir, Binary: "/bin/sh", Log: "server.log",
		Args: func(port int, _ string) []string {
			ports = append(ports, port)
			return []string{"-c", `if [ -e first ]; then touch ready; exec sleep 600; fi; touch first; echo "could not bind IPv4 address: Address already in use" >&2; exit 1`}
		},
		DeathSignal: syscall.SIGKILL, StopSignal: syscall.SIGTERM,
		Ready: func(int) error {
			_, err := os.Stat(filepath.Join(dir, "ready"))
			return err
		},
		ReadyWithin: time.Minute,
		PortTaken:   []string{"already in use"},
	})
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	if len(ports) != 2 || p.Port != ports[1] {
		t.Errorf("launched on ports %v, answering on %d; want a second launch on the port it answers on", ports, p.Port)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s left behind: %v", dir, err)
	}
}

// A missing binary's error names it and says how to install it.
func TestFindBinaryNamesWhatIsMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := FindBinary([]string{t.TempDir()}, "apt-get install it", "mariadbd", "mysqld")
	if err == nil || !strings.Contains(err.Error(), "mariadbd or mysqld not found") || !strings.Contains(err.Error(), "apt-get install it") {
		t.Fatalf("err = %v", err)
	}
}
