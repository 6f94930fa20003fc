//go:build unix

package transport

import (
	"net"
	"syscall"
)

// rawSocket is nc's socket when nc is plain TCP, for tryWrite.
func rawSocket(nc net.Conn) syscall.RawConn {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// tryWrite writes what the socket takes of b at once, without waiting, and
// returns how much that was (0 on any error: the writer goroutine's blocking
// write then meets the error and reports it).
func tryWrite(raw syscall.RawConn, b []byte) int {
	n := 0
	_ = raw.Write(func(fd uintptr) bool {
		if k, err := syscall.Write(int(fd), b); err == nil {
			n = k
		}
		return true // never wait for the socket here
	})
	return n
}
