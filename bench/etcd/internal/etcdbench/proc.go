package etcdbench

import "syscall"

// Niceness returns this process's nice value (children inherit it).
func Niceness() int {
	// The raw syscall returns 20-nice on Linux.
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return 0
	}
	return 20 - p
}
