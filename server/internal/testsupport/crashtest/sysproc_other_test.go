//go:build !linux

package crashtest

import "syscall"

func childAttr() *syscall.SysProcAttr { return nil }
