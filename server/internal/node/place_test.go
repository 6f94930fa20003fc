package node

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// TestCopiedDirectoryIsRefused: a copy (cp -a) of a data directory that
// holds Raft state is refused, naming the flag that confirms a move; the
// original still opens; confirmed once, the copy opens from then on. A copy
// of a directory without state is a new directory: a new incarnation.
func TestCopiedDirectoryIsRefused(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Log("copied directories are detected on Linux only: checking that the copy opens")
	}
	var l syncBuf
	base := t.TempDir()
	cfg := Config{ID: "c1", RaftAddr: "127.0.0.1:0", Dir: filepath.Join(base, "orig"), InitialState: "new",
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&l, nil))}
	open := func(cfg Config) (*Node, error) {
		n, err := Open(cfg)
		if err == nil {
			waitUntil(t, "a cluster ID", func() bool { return n.Cluster() != (fsm.ClusterID{}) })
		}
		return n, err
	}
	n, err := open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	cp := func(from, to string) {
		t.Helper()
		if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
			t.Fatalf("cp -a: %v %s", err, out)
		}
	}
	copied := cfg
	copied.Dir = filepath.Join(base, "copy")
	cp(cfg.Dir, copied.Dir)
	_, err = Open(copied)
	if runtime.GOOS == "linux" {
		if !errors.Is(err, ErrDirMoved) || !strings.Contains(err.Error(), "--data-dir-moved") || !strings.Contains(err.Error(), "lost disk") {
			t.Fatalf("a copy of a member's data directory: %v", err)
		}
		t.Logf("refused: %v", err)
		if n, err = open(cfg); err != nil {
			t.Fatalf("the original after the copy: %v", err)
		}
		n.Close()
		copied.DirMoved = true
	}
	if n, err = open(copied); err != nil {
		t.Fatalf("the copy, confirmed as moved: %v", err)
	}
	n.Close()
	copied.DirMoved = false
	if n, err = open(copied); err != nil {
		t.Fatalf("the moved directory, started again: %v", err)
	}
	n.Close()

	// A directory waiting to be added, without state: the copy is another
	// directory, with an incarnation of its own.
	empty := cfg
	empty.Dir, empty.InitialState = filepath.Join(base, "empty"), "existing"
	if n, err = Open(empty); err != nil {
		t.Fatal(err)
	}
	inc := n.id.incarnation
	n.Close()
	emptyCopy := empty
	emptyCopy.Dir = filepath.Join(base, "empty-copy")
	cp(empty.Dir, emptyCopy.Dir)
	if n, err = Open(emptyCopy); err != nil {
		t.Fatalf("a copy of an empty directory: %v", err)
	}
	defer n.Close()
	if runtime.GOOS == "linux" && n.id.incarnation == inc {
		t.Fatalf("the copy of an empty directory kept its incarnation %x", inc)
	}
	if _, err := os.Stat(locationPath(emptyCopy.Dir)); runtime.GOOS == "linux" && err != nil {
		t.Fatalf("no %s: %v", locationFile, err)
	}
}
