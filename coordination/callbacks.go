package coordination

import "sync"

// callbackQueue runs a session's callbacks (OnQueued) one at a time, in
// order, on a goroutine of its own that lives while callbacks wait: never
// on the connection's reader, so a callback that blocks delays only the
// callbacks of its own session, never the answers, pings and keep-alives
// of the connection's other sessions.
type callbackQueue struct {
	mu      sync.Mutex
	fns     []func()
	running bool
}

// push queues fn; it never blocks.
func (q *callbackQueue) push(fn func()) {
	q.mu.Lock()
	q.fns = append(q.fns, fn)
	start := !q.running
	q.running = true
	q.mu.Unlock()
	if start {
		go q.drain()
	}
}

func (q *callbackQueue) drain() {
	for {
		q.mu.Lock()
		if len(q.fns) == 0 {
			q.fns, q.running = nil, false
			q.mu.Unlock()
			return
		}
		fn := q.fns[0]
		q.fns[0] = nil
		q.fns = q.fns[1:]
		q.mu.Unlock()
		fn()
	}
}

// flushed returns a channel closed once every callback queued before the
// call has run.
func (q *callbackQueue) flushed() <-chan struct{} {
	ch := make(chan struct{})
	q.push(func() { close(ch) })
	return ch
}
