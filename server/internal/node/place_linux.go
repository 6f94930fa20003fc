package node

import (
	"fmt"
	"syscall"
)

// dirLocation names dir's file system and inode. The file system is its
// ID (statfs: from the file system's UUID where it has one, so it does not
// change when devices are numbered differently after a reboot), else the
// device number.
func dirLocation(dir string) (string, bool, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return "", false, err
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return "", false, err
	}
	id := fmt.Sprintf("fsid:%08x%08x", uint32(fs.Fsid.X__val[0]), uint32(fs.Fsid.X__val[1]))
	if fs.Fsid.X__val[0] == 0 && fs.Fsid.X__val[1] == 0 {
		id = fmt.Sprintf("dev:%x", st.Dev)
	}
	return fmt.Sprintf("%s inode:%d", id, st.Ino), true, nil
}
