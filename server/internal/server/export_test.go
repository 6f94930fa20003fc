package server

import "syscall"

import "time"

// Timers is the number of live wait and lease timers on the leader's core.
func Timers(s *Server) int64 { return s.core.Timers() }

// HoldLeadershipWatch stops the leadership watcher from looking at Raft
// until the returned function is called, so that a test can change
// leadership more than once between two looks.
func HoldLeadershipWatch(s *Server) (release func()) {
	s.watchGate.Lock()
	return s.watchGate.Unlock
}

// PauseCore stops the core goroutine until the returned function is called:
// requests and connection closes queue up meanwhile, as they do when the core
// is busy, whatever the machine's speed.
func PauseCore(s *Server) (resume func()) { return s.core.Pause() }

// Conns is the number of open client connections.
func Conns(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// MarkStopping makes s refuse new connections as a stopping server does,
// while its listener still accepts them (the moment between Shutdown
// marking the server closed and closing the listener), until undo is called.
func MarkStopping(s *Server) (undo func()) {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.closed = false
		s.mu.Unlock()
	}
}

// GateResults makes the core wait for a value on the returned channel before
// it learns the outcome of each committed batch (Raft has applied it); close
// the channel to let every outcome through.
func GateResults(s *Server) chan struct{} { return s.core.GateResults() }

// QueuedRequests is the number of requests waiting for the core.
func QueuedRequests(s *Server) int { return s.core.Queued() }

// HeldApplied is the number of tickets held in s's applied state.
func HeldApplied(s *Server) int { return s.node.Held() }

// SetLogLimit changes the rate limit of audit and handshake records: burst
// records per key and window. The limiter's next summary comes within half
// its old window.
func SetLogLimit(s *Server, window time.Duration, burst int) {
	s.logLimit.mu.Lock()
	defer s.logLimit.mu.Unlock()
	s.logLimit.window, s.logLimit.burst = window, burst
}

// KeepAlives reports, for each client connection of s on plain TCP,
// whether its socket has TCP keep-alive on.
func KeepAlives(s *Server) []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var on []bool
	for c := range s.conns {
		if c.raw == nil {
			continue
		}
		v := -1
		_ = c.raw.Control(func(fd uintptr) {
			v, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		})
		on = append(on, v != 0)
	}
	return on
}
