package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ticketing-io/ticketing"
)

// WorkloadConfig shapes the client load.
type WorkloadConfig struct {
	Workers int // each with its own Broker (default 6)
	Keys    int // contended keys k0..k(n-1) (default 4)
	Seed    uint64
	// Dialers, if any, open the workers' connections: worker i uses
	// Dialers[i%len(Dialers)] (the harness dials from client namespaces).
	Dialers []func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Workload is client workers acquiring, holding, releasing and describing
// a few contended keys through the Go client, recording every request.
type Workload struct {
	cfg   WorkloadConfig
	addrs string
	h     *History
	stop  atomic.Bool
	wg    sync.WaitGroup

	mu      sync.Mutex
	brokers []*ticketing.Broker
	errs    map[string]int // unexpected client errors by text, for the report
}

// NewWorkload prepares the workers; Start runs them.
func NewWorkload(cfg WorkloadConfig, addrs string, h *History) *Workload {
	if cfg.Workers == 0 {
		cfg.Workers = 6
	}
	if cfg.Keys == 0 {
		cfg.Keys = 4
	}
	return &Workload{cfg: cfg, addrs: addrs, h: h, errs: map[string]int{}}
}

// Start connects every worker's Broker and starts the workers.
func (w *Workload) Start() error {
	for i := 0; i < w.cfg.Workers; i++ {
		opts := []ticketing.Option{ticketing.WithDialTimeout(2 * time.Second)}
		if len(w.cfg.Dialers) > 0 {
			opts = append(opts, ticketing.WithDialer(w.cfg.Dialers[i%len(w.cfg.Dialers)]))
		}
		b, err := ticketing.Connect(w.addrs, opts...)
		if err != nil {
			return err
		}
		w.brokers = append(w.brokers, b)
	}
	for i, b := range w.brokers {
		w.wg.Add(1)
		go w.run(i, b, rand.New(rand.NewPCG(w.cfg.Seed, uint64(i)+1)))
	}
	return nil
}

// Stop ends the workers after their current request and closes the brokers.
func (w *Workload) Stop() {
	w.stop.Store(true)
	w.wg.Wait()
	for _, b := range w.brokers {
		b.Close()
	}
}

// Errors are the unexpected errors the workers saw, by text, with counts.
func (w *Workload) Errors() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.errs))
	for k, v := range w.errs {
		out[k] = v
	}
	return out
}

// errShape drops numbers and quoted keys from error texts, so that the
// report counts kinds of errors rather than each token.
var errShape = regexp.MustCompile(`"[^"]*"|[0-9][0-9.]*(ms|s|µs)?`)

func (w *Workload) noteErr(err error) {
	w.mu.Lock()
	w.errs[errShape.ReplaceAllString(err.Error(), "#")]++
	w.mu.Unlock()
}

func (w *Workload) run(id int, b *ticketing.Broker, rng *rand.Rand) {
	defer w.wg.Done()
	for !w.stop.Load() {
		key := fmt.Sprintf("k%d", rng.IntN(w.cfg.Keys))
		if rng.IntN(10) == 0 {
			w.describe(id, b, key)
			continue
		}
		var wait time.Duration
		if rng.IntN(2) == 0 {
			wait = time.Second
		}
		lease := time.Duration(2+rng.IntN(2)) * time.Second
		t := w.acquire(id, b, key, wait, lease)
		if t == nil {
			// Not granted: back off briefly so that a down cluster is not
			// hammered (the client waits for a connection within ctx).
			time.Sleep(time.Duration(20+rng.IntN(80)) * time.Millisecond)
			continue
		}
		// Hold for a while; now and then keep it past the lease (it expires).
		if rng.IntN(20) == 0 {
			time.Sleep(time.Until(t.Deadline()) + 200*time.Millisecond)
		} else {
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		}
		w.release(id, b, t)
	}
}

func (w *Workload) acquire(id int, b *ticketing.Broker, key string, wait, lease time.Duration) *ticketing.Ticket {
	ctx, cancel := context.WithTimeout(context.Background(), wait+5*time.Second)
	defer cancel()
	i := w.h.Begin(id, Acquire, key, 0)
	t, err := b.Acquire(ctx, key, wait, lease, 0)
	w.h.End(i, func(op *Op) {
		op.Wait, op.Lease = wait, lease
		switch {
		case err == nil:
			op.Outcome, op.Token, op.Deadline = OK, t.Token(), w.h.Since(t.Deadline())
		case errors.Is(err, ticketing.ErrNotAcquired):
			op.Outcome = Refused
		case errors.Is(err, ticketing.ErrCapacity):
			op.Outcome = NotSent // a capacity reject touches nothing
		case errors.Is(err, ticketing.ErrUnavailable) && !errors.Is(err, ticketing.ErrIndeterminate):
			op.Outcome = NotSent // no connection: nothing was sent
		default: // indeterminate, budget exceeded (granted, then released), cancelled while waiting
			op.Outcome = Unknown
		}
		if err != nil {
			op.Err = err.Error()
		}
	})
	if err != nil && !errors.Is(err, ticketing.ErrNotAcquired) {
		w.noteErr(err)
	}
	return t
}

func (w *Workload) release(id int, b *ticketing.Broker, t *ticketing.Ticket) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*ticketing.ReleaseBound)
	defer cancel()
	i := w.h.Begin(id, Release, t.Key(), t.Token())
	err := t.Release(ctx)
	w.h.End(i, func(op *Op) {
		switch {
		case err == nil:
			op.Outcome = OK
		case errors.Is(err, ticketing.ErrNotHeldAfterRetry):
			// The earlier attempt may have released it (F6).
			op.Outcome = Unknown
		case errors.Is(err, ticketing.ErrNotHeld):
			op.Outcome = Refused
		case errors.Is(err, ticketing.ErrUnavailable) && !errors.Is(err, ticketing.ErrIndeterminate):
			op.Outcome = NotSent
		default:
			op.Outcome = Unknown
		}
		if err != nil {
			op.Err = err.Error()
		}
	})
	if err != nil && !errors.Is(err, ticketing.ErrNotHeld) {
		w.noteErr(err)
	}
}

func (w *Workload) describe(id int, b *ticketing.Broker, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	i := w.h.Begin(id, Describe, key, 0)
	d, err := b.Describe(ctx, key)
	w.h.End(i, func(op *Op) {
		if err != nil {
			op.Outcome, op.Err = NotSent, err.Error() // read-only: no effect either way
			w.noteErr(err)
			return
		}
		op.Outcome, op.Held, op.Token = OK, d.Held, d.Token
	})
}

// Describe records one describe of every key from a fresh broker (the final
// read after the faults are healed), waiting up to d for a leader.
func FinalReads(addrs string, keys int, h *History, worker int, d time.Duration) error {
	b, err := ticketing.Connect(addrs, ticketing.WithDialTimeout(2*time.Second))
	if err != nil {
		return err
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := b.WaitReady(ctx); err != nil {
		return err
	}
	w := &Workload{h: h, errs: map[string]int{}}
	for k := 0; k < keys; k++ {
		w.describe(worker, b, fmt.Sprintf("k%d", k))
	}
	return nil
}
