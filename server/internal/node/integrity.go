package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// memberMarker is a file written into the data directory once this server
// holds Raft state. If it is there but raft.db is missing or empty, the log
// was lost: starting anyway would serve an empty state and grant old tokens
// again, so Open refuses.
const memberMarker = "MEMBER"

// ErrDamaged reports a data directory that cannot be trusted.
var ErrDamaged = errors.New("data directory damaged")

func damaged(path string, cause error) error {
	return fmt.Errorf("%w: %s: %v. This server's state cannot be trusted and it will not start; "+
		"restore it from a backup (ticketd --restore), or remove its data directory and add it back "+
		"to its cluster as a new member (ticketctl members remove/add)", ErrDamaged, path, cause)
}

// ErrAccess reports a data directory this process may not read or write
// (permissions, a read-only file system). That says nothing about damage.
var ErrAccess = errors.New("data directory not accessible")

func isAccess(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

// accessOr turns a permission or read-only error into ErrAccess with the
// fix; other errors are returned unchanged.
func accessOr(dir string, err error) error {
	if err == nil || !isAccess(err) {
		return err
	}
	return fmt.Errorf("%w: %v. The data is not known to be damaged: give the user ticketd runs as "+
		"read and write access to %s and everything in it (for example chown -R ticketd:ticketd %s), "+
		"or mount its file system read-write, then start again", ErrAccess, err, dir, dir)
}

// checkWritable creates, syncs and removes a file in dir, so that a
// read-only or foreign-owned directory is reported as such before any
// store is opened.
func checkWritable(dir string) error {
	p := filepath.Join(dir, ".ticketd-write-check")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err == nil {
		err = f.Sync()
		_ = f.Close()
		os.Remove(p)
	}
	if err != nil {
		if isAccess(err) {
			return accessOr(dir, err)
		}
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	for _, name := range []string{"raft.db", memberMarker, clusterFile, incarnationFile} {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
		if err == nil {
			_ = f.Close()
		} else if isAccess(err) {
			return accessOr(dir, err)
		}
	}
	return nil
}

func markerPath(dir string) string { return filepath.Join(dir, memberMarker) }

func hasMarker(dir string) bool {
	_, err := os.Stat(markerPath(dir))
	return err == nil
}

// writeMarker records that this directory holds a member's state.
func writeMarker(dir, id string) error {
	p := markerPath(dir)
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "ticketd member %s, data since %s\n", id, time.Now().UTC().Format(time.RFC3339)); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// guard turns a panic or a memory fault (a truncated, memory-mapped file)
// in the calling goroutine into an error about path.
func guard(path string, err *error) {
	if r := recover(); r != nil {
		*err = damaged(path, fmt.Errorf("reading it failed: %v", r))
	}
}
