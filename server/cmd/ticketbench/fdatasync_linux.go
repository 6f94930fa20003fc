package main

import (
	"os"
	"syscall"
)

// fdatasync is what bbolt (and etcd's WAL) call on Linux.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
