// Package freeport hands out loopback addresses for servers that tests and
// ticketbench start, chosen so that nothing else takes them before the
// server binds them, or while it restarts on them.
//
// A port from the kernel's port 0 is an ephemeral port: any process's
// outgoing connection may be given it as its local port the moment it is
// free, and a server that is killed and restarted on its old address then
// fails with "address already in use". Ports here come from below the
// kernel's ephemeral range (10000 up to it), which outgoing connections never
// use, and one process never hands out the same port twice.
//
//	addrs, err := freeport.Take(3) // client, raft and HTTP listeners
//	if err != nil {
//		return err
//	}
package freeport

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the first port handed out: below it live well-known services.
const lowest = 10000

// pick draws a port offset in [0, n); tests replace it.
var pick = rand.IntN

var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Take returns n distinct loopback addresses ("127.0.0.1:port") that were
// free a moment ago, outside the ephemeral range, and never returned before
// by this process.
func Take(n int) ([]string, error) {
	top := ephemeralStart()
	out := make([]string, 0, n)
	handedOut.Lock()
	defer handedOut.Unlock()
	for tries := 0; len(out) < n; tries++ {
		if tries > 1000*n {
			return nil, errors.New("freeport: no free port below the ephemeral range after many tries")
		}
		p := lowest + pick(top-lowest)
		if handedOut.ports[p] {
			continue
		}
		addr := "127.0.0.1:" + strconv.Itoa(p)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // in use
		}
		_ = ln.Close()
		handedOut.ports[p] = true
		out = append(out, addr)
	}
	return out, nil
}

// Addr is Take(1)[0].
func Addr() (string, error) {
	a, err := Take(1)
	if err != nil {
		return "", err
	}
	return a[0], nil
}

// ephemeralStart reads where the kernel's ephemeral ports begin (Linux);
// 32768, Linux's default and below every other system's, elsewhere.
func ephemeralStart() int {
	const fallback = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallback
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return fallback
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= lowest+1000 {
		// A range that starts this low leaves no room below it: take
		// ports below the default start and accept the small risk.
		return fallback
	}
	return lo
}
