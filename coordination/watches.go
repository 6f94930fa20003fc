package coordination

import "sync"

// Change is what a watch reports, once. Both false: a notification may have
// been lost (the connection dropped, the session ended, or a newer watch on
// the same semaphore replaced this one): describe again.
type Change struct {
	DataChanged, OwnersChanged bool
}

type watch struct {
	ch   chan Change
	once sync.Once
}

func (w *watch) fire(c Change) {
	w.once.Do(func() {
		w.ch <- c
		close(w.ch)
	})
}

// watchSet is a session's watches not yet fired: a lost connection or the
// session's end fires them empty (a notification may have been lost).
type watchSet struct {
	mu sync.Mutex
	m  map[*watch]struct{}
}

func (ws *watchSet) add(w *watch) {
	ws.mu.Lock()
	if ws.m == nil {
		ws.m = make(map[*watch]struct{})
	}
	ws.m[w] = struct{}{}
	ws.mu.Unlock()
}

func (ws *watchSet) remove(w *watch) {
	ws.mu.Lock()
	delete(ws.m, w)
	ws.mu.Unlock()
}

// fireAll fires every watch empty. It may run under the attachment's lock,
// and takes only the set's.
func (ws *watchSet) fireAll() {
	ws.mu.Lock()
	fired := ws.m
	ws.m = nil
	ws.mu.Unlock()
	for w := range fired {
		w.fire(Change{})
	}
}
