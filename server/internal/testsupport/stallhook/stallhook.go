// Package stallhook names the stall hook's signals and log lines, shared by
// ticketd built with the hook (go build -tags stallhook; the hook itself is
// server/internal/core/stallhook.go) and the nemesis harness that drives
// it. A ticketd built without the tag has no hook: the signals would end it.
//
// The hook stalls a leader between a commit and its answer: once armed, the
// next batch that commits a grant to an acquire with wait > 0 stops the
// leader's core (the goroutine that answers clients) before it handles that
// outcome, until resumed. Raft, the connections and the pings go on, so the
// clients stay connected while another server can take over.
package stallhook

import "syscall"

const (
	// Arm arms the hook for the next commit of a grant with wait > 0.
	Arm = syscall.SIGUSR1
	// Resume lets a stalled core go on and disarms the hook.
	Resume = syscall.SIGUSR2
)

// Log lines (slog messages) of a ticketd built with the hook.
const (
	// BuiltIn is logged at start: the signals above are the hook's.
	BuiltIn = "stall hook built in"
	// Stalled is logged when the core stops after a commit.
	Stalled = "stall hook: the core is stalled between a commit and its answer"
)
