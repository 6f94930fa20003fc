package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/fence"
	"github.com/ticketing-io/ticketing/retry"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/pgtest"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// instance is one running copy of the service: its own Ticketing client,
// database pool and HTTP server.
type instance struct {
	name   string
	url    string
	broker *ticketing.Broker
	store  *store
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// logBuffer collects an instance's log; the test prints it if it fails.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func startInstance(ctx context.Context, t *testing.T, name, addrs, dsn string) (*instance, error) {
	var logs logBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log of instance %s:\n%s", name, logs.String())
		}
	})
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("instance", name)
	b, err := ticketing.Connect(addrs, ticketing.WithLogger(log))
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { b.Close() })
	if err := b.WaitReady(ctx); err != nil {
		return nil, err
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { db.Close() })
	s, err := openStore(ctx, db)
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(newApp(b, s, name, log).routes())
	t.Cleanup(srv.Close)
	return &instance{name: name, url: srv.URL, broker: b, store: s}, nil
}

// TestOrders runs two instances of the service, "a" and "b", against a
// 3-node Ticketing cluster and one PostgreSQL database.
func TestOrders(t *testing.T) {
	ctx := testCtx(t)
	c := testcluster.Start(t, 3)
	dsn := pgtest.Shared(t).NewDatabase(t)

	// Both start at once, as two replicas would: creating the tables
	// concurrently must work.
	var insts [2]*instance
	var errs [2]error
	var wg sync.WaitGroup
	for i, name := range []string{"a", "b"} {
		wg.Go(func() { insts[i], errs[i] = startInstance(ctx, t, name, c.AddrList(), dsn) })
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		t.Fatal(err)
	}
	a, b := insts[0], insts[1]

	t.Run("same order paid concurrently through both instances", func(t *testing.T) {
		t.Parallel()
		const orders, perInstance = 5, 2
		for n := range orders {
			id := fmt.Sprintf("same-%d", n)
			createOrder(t, a, id, 1250)
			start := make(chan struct{})
			type result struct {
				inst   *instance
				status int
				body   errorBody
				order  Order
			}
			results := make(chan result, 2*perInstance)
			var wg sync.WaitGroup
			for _, in := range []*instance{a, b, a, b}[:2*perInstance] {
				wg.Go(func() {
					<-start
					status, raw := pay(t, in, id)
					r := result{inst: in, status: status}
					if status == http.StatusOK {
						decode(t, raw, &r.order)
					} else {
						decode(t, raw, &r.body)
					}
					results <- r
				})
			}
			close(start)
			wg.Wait()
			close(results)

			var winner *instance
			var paid Order
			for r := range results {
				switch r.status {
				case http.StatusOK:
					if winner != nil {
						t.Errorf("order %s: paid twice, by %s and by %s", id, winner.name, r.inst.name)
					}
					winner, paid = r.inst, r.order
				case http.StatusConflict:
					if r.body.Error != errAlreadyPaid.Error() || r.body.Order == nil || r.body.Order.Status != "paid" {
						t.Errorf("order %s via %s: 409 %+v, want %q with the paid order", id, r.inst.name, r.body, errAlreadyPaid)
					}
				default:
					t.Errorf("order %s via %s: status %d %+v", id, r.inst.name, r.status, r.body)
				}
			}
			if winner == nil {
				t.Fatalf("order %s: no request paid it", id)
			}
			if paid.Status != "paid" || paid.PaidBy != winner.name || paid.PaidToken == 0 || paid.PaidAt == nil {
				t.Errorf("order %s: paid response %+v, want paid by %s with a token", id, paid, winner.name)
			}
			if got := getOrder(t, b, id); got.PaidBy != winner.name || got.PaidToken != paid.PaidToken {
				t.Errorf("GET order %s = %+v, want paid by %s with token %d", id, got, winner.name, paid.PaidToken)
			}
			wantPayments(t, a.store, id, 1)
		}
	})

	t.Run("different orders paid in parallel", func(t *testing.T) {
		t.Parallel()
		const orders = 16
		for n := range orders {
			createOrder(t, b, fmt.Sprintf("par-%d", n), int64(100+n))
		}
		var wg sync.WaitGroup
		for n := range orders {
			in := []*instance{a, b}[n%2]
			id := fmt.Sprintf("par-%d", n)
			wg.Go(func() {
				status, raw := pay(t, in, id)
				if status != http.StatusOK {
					t.Errorf("pay %s via %s: %d %s", id, in.name, status, raw)
				}
			})
		}
		wg.Wait()
		for n := range orders {
			id := fmt.Sprintf("par-%d", n)
			if got := getOrder(t, a, id); got.Status != "paid" || got.PaidBy != []*instance{a, b}[n%2].name || got.AmountCents != int64(100+n) {
				t.Errorf("order %s = %+v", id, got)
			}
			wantPayments(t, a.store, id, 1)
		}
	})

	t.Run("unknown and invalid orders", func(t *testing.T) {
		t.Parallel()
		if status, raw := pay(t, a, "nope"); status != http.StatusNotFound {
			t.Errorf("pay unknown order: %d %s", status, raw)
		}
		if status, raw := do(t, http.MethodGet, b.url+"/orders/nope", nil); status != http.StatusNotFound {
			t.Errorf("get unknown order: %d %s", status, raw)
		}
		if status, raw := do(t, http.MethodGet, b.url+"/orders/no%20spaces", nil); status != http.StatusBadRequest {
			t.Errorf("get invalid id: %d %s", status, raw)
		}
		if status, raw := do(t, http.MethodPut, b.url+"/orders/zero", []byte(`{"amount_cents": 0}`)); status != http.StatusBadRequest {
			t.Errorf("create with amount 0: %d %s", status, raw)
		}
		createOrder(t, a, "twice", 500)
		if status, raw := do(t, http.MethodPut, b.url+"/orders/twice", []byte(`{"amount_cents": 500}`)); status != http.StatusOK {
			t.Errorf("create the same order again: %d %s, want 200", status, raw)
		}
		if status, raw := do(t, http.MethodPut, b.url+"/orders/twice", []byte(`{"amount_cents": 501}`)); status != http.StatusConflict {
			t.Errorf("create it with another amount: %d %s, want 409", status, raw)
		}
	})

	t.Run("no reachable leader: 503 and nothing recorded", func(t *testing.T) {
		t.Parallel()
		createOrder(t, a, "unreachable", 300)
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		nowhere, err := ticketing.Connect(testcluster.FreePort(t), ticketing.WithLogger(log))
		if err != nil {
			t.Fatal(err)
		}
		defer nowhere.Close()
		cut := newApp(nowhere, a.store, "cut-off", log)
		cut.acquireTimeout = 100 * time.Millisecond
		srv := httptest.NewServer(cut.routes())
		defer srv.Close()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders/unreachable/pay", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("pay without a leader: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if got := getOrder(t, a, "unreachable"); got.Status != "new" {
			t.Errorf("order = %+v, want status new", got)
		}
		wantPayments(t, a.store, "unreachable", 0)
	})

	// The store's own rules, with real tickets.
	t.Run("a rerun of a committed payment is answered, not repeated", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		createOrder(t, a, "rerun", 700)
		tk, err := acquireTicket(ctx, a.broker, lockKey("rerun"))
		if err != nil {
			t.Fatal(err)
		}
		defer tk.Close()
		first, err := a.store.pay(ctx, "rerun", tk.Token(), a.name, "")
		if err != nil {
			t.Fatal(err)
		}
		// As retry.Do would after a commit whose reply was lost.
		again, err := a.store.pay(ctx, "rerun", tk.Token(), a.name, "")
		if err != nil || again.PaidToken != first.PaidToken || again.PaidBy != a.name {
			t.Errorf("rerun with the same token: %+v, %v; want the order as first paid (%+v)", again, err, first)
		}
		wantPayments(t, a.store, "rerun", 1)
	})

	t.Run("a repeated request with the same Idempotency-Key gets the first answer", func(t *testing.T) {
		t.Parallel()
		createOrder(t, a, "idem", 400)
		first, raw := payWithKey(t, a, "idem", "req-1")
		if first != http.StatusOK {
			t.Fatalf("first pay: %d %s", first, raw)
		}
		var paid Order
		decode(t, raw, &paid)
		// The response was lost; the client repeats the request, through
		// either instance.
		for _, in := range []*instance{a, b} {
			status, raw := payWithKey(t, in, "idem", "req-1")
			var again Order
			decode(t, raw, &again)
			if status != http.StatusOK || again.PaidToken != paid.PaidToken || again.PaidBy != paid.PaidBy || again.Status != "paid" {
				t.Errorf("repeat via %s: %d %s, want 200 with the first answer %+v", in.name, status, raw, paid)
			}
		}
		// Another request (another key, or none) is a second payment: refused.
		for _, k := range []string{"req-2", ""} {
			if status, raw := payWithKey(t, b, "idem", k); status != http.StatusConflict {
				t.Errorf("pay with key %q: %d %s, want 409", k, status, raw)
			}
		}
		if status, raw := payWithKey(t, a, "idem", "has space"); status != http.StatusBadRequest {
			t.Errorf("invalid key: %d %s, want 400", status, raw)
		}
		wantPayments(t, a.store, "idem", 1)
	})

	t.Run("the ledger holds one payment per order even around the fence", func(t *testing.T) {
		t.Parallel()
		createOrder(t, a, "backstop", 600)
		// A writer that bypasses the fence records a payment without
		// marking the order paid.
		ins := `INSERT INTO payments (order_id, amount_cents, instance, token) VALUES ('backstop', 600, 'rogue', 1)`
		if _, err := a.store.db.Exec(ins); err != nil {
			t.Fatal(err)
		}
		if _, err := a.store.db.Exec(ins); err == nil || !strings.Contains(err.Error(), "23505") {
			t.Fatalf("second payment row for one order: %v, want a unique violation (23505)", err)
		}
		// The service's own payment then hits the backstop: 409, not 500.
		if status, raw := pay(t, b, "backstop"); status != http.StatusConflict {
			t.Errorf("pay: %d %s, want 409", status, raw)
		}
		wantPayments(t, a.store, "backstop", 1)
	})

	t.Run("a COMMIT that loses the race with the deadline is a 503, and records nothing", func(t *testing.T) {
		t.Parallel()
		createOrder(t, a, "late", 800)
		late := *a.store
		late.beforeCommit = func(ctx context.Context, tx *sql.Tx) {
			<-ctx.Done() // the ticket's deadline passes before COMMIT
			// Wait until database/sql has rolled the transaction back.
			for deadline := time.Now().Add(30 * time.Second); ; {
				if _, err := tx.ExecContext(context.Background(), "SELECT 1"); errors.Is(err, sql.ErrTxDone) {
					return
				}
				if time.Now().After(deadline) {
					t.Error("the transaction was not rolled back after its deadline")
					return
				}
				time.Sleep(time.Millisecond) // polling interval
			}
		}
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		short := newApp(a.broker, &late, "late", log)
		short.lease, short.budget = 2*time.Second, 500*time.Millisecond // a deadline soon
		srv := httptest.NewServer(short.routes())
		defer srv.Close()
		status, raw := do(t, http.MethodPost, srv.URL+"/orders/late/pay", nil)
		if status != http.StatusServiceUnavailable {
			t.Errorf("pay whose COMMIT came after the deadline: %d %s, want 503", status, raw)
		}
		if got := getOrder(t, a, "late"); got.Status != "new" {
			t.Errorf("order = %+v, want status new", got)
		}
		wantPayments(t, a.store, "late", 0)
	})

	t.Run("a stale ticket's payment is rejected", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		createOrder(t, a, "stale", 900)
		old, err := acquireTicket(ctx, a.broker, lockKey("stale"))
		if err != nil {
			t.Fatal(err)
		}
		if err := old.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// A newer holder of the key (through instance b) raises the order's
		// fence mark without paying: its transaction fails after the check.
		newer, err := acquireTicket(ctx, b.broker, lockKey("stale"))
		if err != nil {
			t.Fatal(err)
		}
		defer newer.Close()
		tx, err := b.store.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.store.fence.Check(ctx, tx, lockKey("stale"), newer.Token()); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		_, err = a.store.pay(ctx, "stale", old.Token(), a.name, "")
		if !errors.Is(err, fence.ErrStaleToken) {
			t.Fatalf("pay with the old token: %v, want fence.ErrStaleToken", err)
		}
		if got := getOrder(t, a, "stale"); got.Status != "new" {
			t.Errorf("order after the rejected payment: %+v, want status new", got)
		}
		wantPayments(t, a.store, "stale", 0)
	})
}

// pay is POST /orders/{id}/pay as a well-behaved client sends it: a 503
// means "not attempted, try again" (on this loaded test machine, usually a
// leader election in the test cluster, whose Raft timeouts are short), so it
// tries again, a bounded number of times.
func pay(t *testing.T, in *instance, id string) (int, []byte) {
	t.Helper()
	for range 5 {
		status, raw := do(t, http.MethodPost, in.url+"/orders/"+id+"/pay", nil)
		if status != http.StatusServiceUnavailable {
			return status, raw
		}
		t.Logf("pay %s via %s: 503 %s; trying again", id, in.name, raw)
	}
	return do(t, http.MethodPost, in.url+"/orders/"+id+"/pay", nil)
}

// payWithKey is one POST /orders/{id}/pay with an Idempotency-Key ("" for
// none), retried on 503 like pay.
func payWithKey(t *testing.T, in *instance, id, key string) (int, []byte) {
	t.Helper()
	for try := 0; ; try++ {
		req, err := http.NewRequest(http.MethodPost, in.url+"/orders/"+id+"/pay", nil)
		if err != nil {
			t.Fatal(err)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusServiceUnavailable || try == 5 {
			return resp.StatusCode, raw
		}
	}
}

// acquireTicket takes an order's ticket as the service does, retried the
// same way.
func acquireTicket(ctx context.Context, b *ticketing.Broker, key string) (tk *ticketing.Ticket, err error) {
	err = retry.Do(ctx, func(ctx context.Context) error {
		tk, err = b.Acquire(ctx, key, acquireWait, lease, budget)
		return err
	}, retry.Idempotent(true))
	return tk, err
}

func do(t *testing.T, method, url string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Error(err)
	}
	return resp.StatusCode, raw
}

func decode(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Errorf("decode %s: %v", raw, err)
	}
}

func createOrder(t *testing.T, in *instance, id string, amount int64) {
	t.Helper()
	status, raw := do(t, http.MethodPut, in.url+"/orders/"+id, fmt.Appendf(nil, `{"amount_cents": %d}`, amount))
	if status != http.StatusCreated {
		t.Fatalf("create order %s: %d %s", id, status, raw)
	}
}

func getOrder(t *testing.T, in *instance, id string) Order {
	t.Helper()
	status, raw := do(t, http.MethodGet, in.url+"/orders/"+id, nil)
	if status != http.StatusOK {
		t.Fatalf("get order %s: %d %s", id, status, raw)
	}
	var o Order
	decode(t, raw, &o)
	return o
}

func wantPayments(t *testing.T, s *store, id string, want int) {
	t.Helper()
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM payments WHERE order_id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Errorf("order %s has %d payments, want %d", id, n, want)
	}
}
