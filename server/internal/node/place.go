package node

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// Copied data directories.
//
// A copy of a data directory (cp -a, rsync, a file-level backup put back)
// may be older than what its server acknowledged: started, it would count
// towards a majority with entries missing, and tokens granted since could
// be granted again. The LOCATION file records where the directory is: its
// file system and its inode. A copy is a new directory, with another inode
// (or on another file system), so a directory that holds Raft state and is
// no longer where LOCATION says is refused until the operator says it is
// the same directory moved whole while ticketd was stopped (DirMoved).
// What this cannot see: a directory put back in place with its inode, from
// a disk or VM snapshot. That is a lost disk too (docs/design.md).

// locationFile records the file system and inode of the data directory.
const locationFile = "LOCATION"

// ErrDirMoved reports a data directory that holds Raft state and is not
// where it was created: a copy, or the directory moved to another place.
var ErrDirMoved = errors.New("data directory copied or moved")

func locationPath(dir string) string { return filepath.Join(dir, locationFile) }

// checkLocation compares dir's place with its LOCATION file, and records
// the place when there is no file yet (a new directory, or one from a
// version before the file) or the operator confirmed a move (moved).
// existing: dir holds Raft state.
func checkLocation(dir string, existing, moved bool, logger *slog.Logger) error {
	here, ok, err := dirLocation(dir)
	if err != nil {
		return accessOr(dir, fmt.Errorf("read the place of %s: %w", dir, err))
	}
	if !ok {
		return nil // this platform does not say
	}
	b, err := os.ReadFile(locationPath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return writeLocation(dir, here)
	}
	if err != nil {
		return accessOr(dir, damaged(locationPath(dir), err))
	}
	was := strings.TrimSpace(string(b))
	if was == here {
		return nil
	}
	if !existing {
		// A directory without Raft state has nothing to roll back; as a new
		// directory it gets a new incarnation, so a leader admitting the
		// original does not take the copy for it.
		if err := os.Remove(incarnationPath(dir)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return accessOr(dir, err)
		}
		return writeLocation(dir, here)
	}
	if moved {
		logger.Warn("data directory moved, as confirmed with --data-dir-moved: recording its new place", "dir", dir, "was", was, "now", here)
		return writeLocation(dir, here)
	}
	return fmt.Errorf("%w: %s was created at %s and is now at %s: it is a copy (cp -a, rsync, a backup put back) or the directory moved. "+
		"A copy may be older than what this server acknowledged, and starting it could grant tokens again. "+
		"If this is the directory itself, moved whole while ticketd was stopped, and the original will never be started again, start once with --data-dir-moved. "+
		"Otherwise it is a lost disk: ticketctl members remove ID on the cluster, empty this directory, start with --join, ticketctl members add ID RAFTADDR",
		ErrDirMoved, dir, was, here)
}

func writeLocation(dir, here string) error {
	if err := writeFileSync(dir, locationPath(dir), here+"\n"); err != nil {
		return accessOr(dir, fmt.Errorf("write %s: %w", locationPath(dir), err))
	}
	return nil
}
