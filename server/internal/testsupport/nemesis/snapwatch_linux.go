package nemesis

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// waitSnapshotStart waits until one of the servers starts writing a Raft
// snapshot (hashicorp/raft's file store creates a directory named *.tmp in
// raft/snapshots and renames it when the snapshot is complete) and returns
// that server's index, or -1 when none started within d. inotify reports the
// creation as it happens, so the caller can kill the server while the
// snapshot is being written.
func waitSnapshotStart(ctx context.Context, c *Cluster, d time.Duration) (int, string, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return -1, "", err
	}
	defer func() { _ = unix.Close(fd) }()
	wds := map[int32]int{}
	for i, nd := range c.Nodes {
		wd, err := unix.InotifyAddWatch(fd, filepath.Join(nd.dataDir(), "raft", "snapshots"), unix.IN_CREATE)
		if err != nil {
			return -1, "", err
		}
		wds[int32(wd)] = i
	}
	deadline := time.Now().Add(d)
	buf := make([]byte, 64<<10)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		// Wait for events without blocking past the deadline.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, 100); err != nil && !errors.Is(err, unix.EINTR) {
			return -1, "", err
		}
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			return -1, "", err
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafePointer(buf[off:]))
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if strings.HasSuffix(name, ".tmp") {
				return wds[ev.Wd], name, nil
			}
		}
	}
	return -1, "", ctx.Err()
}
