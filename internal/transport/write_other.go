//go:build !unix

package transport

import (
	"net"
	"syscall"
)

// rawSocket: elsewhere every write goes through the writer goroutine.
func rawSocket(net.Conn) syscall.RawConn { return nil }

func tryWrite(syscall.RawConn, []byte) int { return 0 }
