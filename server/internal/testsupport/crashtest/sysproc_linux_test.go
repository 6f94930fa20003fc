package crashtest

import "syscall"

// childAttr makes a server die with the test binary, so a test killed by its
// timeout leaves no ticketd behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
