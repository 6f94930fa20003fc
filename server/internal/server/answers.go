package server

import (
	"sync"
	"syscall"
)

// directWrites is how many connections the core writes to itself at the end
// of a turn; the answers of more connections go to writer goroutines, which
// the other cores run in parallel, so a large batch's many connections do
// not lengthen the core's turn by a write each.
const directWrites = 8

// answerQueue is the connections the core queued answers to in its current
// turn. When the turn ends (FlushAnswers) the core writes each with one
// non-blocking write from its own goroutine: a lone client's answer then
// costs no goroutine start and no wake-up of another thread, and a batch's
// answers to one connection leave in one write. What the socket does not
// take at once goes to the connection's writer goroutine, which applies the
// write deadline. The lock is for a core that outlives its term beside the
// next one; each takes it twice per turn.
type answerQueue struct {
	mu    sync.Mutex
	conns []*conn
	spare []*conn
}

// mark records that c has answers queued by the core.
func (q *answerQueue) mark(c *conn) {
	q.mu.Lock()
	if !c.marked {
		c.marked = true
		q.conns = append(q.conns, c)
	}
	q.mu.Unlock()
}

// flush writes every marked connection's queued answers.
func (q *answerQueue) flush() {
	q.mu.Lock()
	conns := q.conns
	if len(conns) == 0 {
		q.mu.Unlock()
		return
	}
	q.conns = q.spare[:0]
	for _, c := range conns {
		c.marked = false
	}
	q.mu.Unlock()
	for i, c := range conns {
		if i < directWrites {
			c.writeNow()
		} else {
			c.notify()
		}
		conns[i] = nil
	}
	q.mu.Lock()
	q.spare = conns[:0]
	q.mu.Unlock()
}

// writeNow writes the queued answers with one non-blocking write when no
// writer runs; the rest, if any, is left to a writer goroutine. A TLS
// connection always uses its writer.
func (c *conn) writeNow() {
	c.mu.Lock()
	if c.raw == nil || c.writing || c.closing || len(c.out) == 0 {
		c.mu.Unlock()
		c.notify()
		return
	}
	buf := c.out
	c.out = c.spare[:0]
	c.spare = nil
	c.writing = true // others queue behind this write, as behind a writer
	c.mu.Unlock()
	n := 0
	_ = c.raw.Write(func(fd uintptr) bool {
		if k, err := syscall.Write(int(fd), buf); err == nil {
			n = k
		}
		return true // never wait for the socket here: a writer does
	})
	c.mu.Lock()
	if n < len(buf) || len(c.out) > 0 || c.closing {
		// Keep order: the unwritten rest first, then what was queued
		// during the write. The writer (still marked running) takes it.
		rest := make([]byte, 0, len(buf)-n+len(c.out))
		rest = append(append(rest, buf[n:]...), c.out...)
		c.out = rest
		c.mu.Unlock()
		go c.flush()
		return
	}
	c.writing = false
	if cap(buf) <= 256<<10 {
		c.spare = buf[:0]
	}
	c.mu.Unlock()
}
