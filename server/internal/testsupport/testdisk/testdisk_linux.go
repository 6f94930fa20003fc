// Package testdisk gives tests a small file system they can fill: a tmpfs
// of a chosen size mounted on a directory (the tests run as root), and a
// filler that writes until the file system answers ENOSPC. The full-disk
// tests of the log store and of the server use it.
//
//	testdisk.MountTmpfs(t, dir, 1<<20)
//	filler := testdisk.Fill(t, dir) // every later write in dir fails with ENOSPC
//	_ = os.Remove(filler)           // space returns
package testdisk

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// MountTmpfs puts a tmpfs of size bytes on dir (created when missing),
// unmounted when the test ends, after the cleanups registered later (the
// servers using it stop first).
func MountTmpfs(t testing.TB, dir string, size int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Fatalf("mount a tmpfs on %s (the test needs root): %v", dir, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// Fill writes the file dir/filler until the file system is full and returns
// its name; removing it gives the space back.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	name := filepath.Join(dir, "filler")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, 4<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return name
		}
	}
}
