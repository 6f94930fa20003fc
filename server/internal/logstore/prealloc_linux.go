package logstore

import (
	"os"

	"golang.org/x/sys/unix"
)

// preallocate reserves size bytes for f, if the file system can: appends
// then change no file size, so each fdatasync writes the data alone.
func preallocate(f *os.File, size int64) {
	_ = unix.Fallocate(int(f.Fd()), 0, 0, size)
}
