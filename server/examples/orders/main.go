// Command orders is a small order service that shows how to use Ticketing
// with PostgreSQL: several instances may receive the payment of the same
// order at the same time, and it must be recorded exactly once.
//
//	PUT  /orders/{id}       {"amount_cents": 1250}   create an order (idempotent)
//	GET  /orders/{id}                                read it
//	POST /orders/{id}/pay                            pay it (send Idempotency-Key to repeat it safely)
//
// Paying takes the ticket of the key "order-<id>", records the payment in one
// PostgreSQL transaction fenced with the ticket's token (package fence),
// retried on transient errors (package retry), commits, and only then
// releases the ticket. See README.md for running two instances against a
// three-node cluster.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/fence"
	"github.com/ticketing-io/ticketing/retry"
)

// The ticket of an order: wait up to acquireWait in the key's queue behind
// another instance paying the same order, hold it for at most lease, and
// take it only with at least budget of the lease left for the transaction.
const (
	acquireWait = 5 * time.Second
	lease       = 10 * time.Second
	budget      = 2 * time.Second
	// acquireTimeout bounds Acquire as a whole: while no leader is reachable
	// it would wait for one as long as its context allows.
	acquireTimeout = acquireWait + 2*time.Second
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
}

func run() error {
	host, _ := os.Hostname()
	listen := flag.String("listen", envOr("ORDERS_LISTEN", "127.0.0.1:8080"), "HTTP listen address (env ORDERS_LISTEN)")
	addrs := flag.String("ticketing", envOr("TICKETING_ADDRS", "127.0.0.1:5225"), "comma-separated Ticketing server addresses (env TICKETING_ADDRS)")
	token := flag.String("token", os.Getenv("TICKETING_TOKEN"), "Ticketing client token (env TICKETING_TOKEN, which keeps it out of the process list)")
	dsn := flag.String("db", os.Getenv("DATABASE_URL"), "PostgreSQL DSN, e.g. postgres://user@127.0.0.1:5432/orders?sslmode=disable (env DATABASE_URL)")
	instance := flag.String("instance", envOr("ORDERS_INSTANCE", host), "name of this instance, recorded with each payment (env ORDERS_INSTANCE)")
	flag.Parse()
	if *dsn == "" {
		return errors.New("-db (or DATABASE_URL) is required")
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("instance", *instance)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts := []ticketing.Option{ticketing.WithLogger(log)}
	if *token != "" {
		opts = append(opts, ticketing.WithToken(*token))
	}
	broker, err := ticketing.Connect(*addrs, opts...)
	if err != nil {
		return err
	}
	defer broker.Close()
	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = broker.WaitReady(readyCtx)
	cancel()
	if err != nil {
		return fmt.Errorf("ticketing: %w", err)
	}

	db, err := sql.Open("pgx", *dsn)
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	st, err := openStore(ctx, db)
	if err != nil {
		return err
	}

	srv := &http.Server{
		Addr:              *listen,
		Handler:           newApp(broker, st, *instance, log).routes(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("serving", "listen", *listen, "ticketing", *addrs)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	stop() // a second signal ends the process at once
	log.Info("shutting down: finishing requests in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// app is the HTTP side of one instance.
type app struct {
	broker         *ticketing.Broker
	store          *store
	instance       string
	log            *slog.Logger
	acquireTimeout time.Duration
	lease, budget  time.Duration // of the order's ticket
}

func newApp(b *ticketing.Broker, s *store, instance string, log *slog.Logger) *app {
	return &app{broker: b, store: s, instance: instance, log: log, acquireTimeout: acquireTimeout,
		lease: lease, budget: budget}
}

func (a *app) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /orders/{id}", a.createOrder)
	mux.HandleFunc("GET /orders/{id}", a.getOrder)
	mux.HandleFunc("POST /orders/{id}/pay", a.payOrder)
	return mux
}

var validID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func orderID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if !validID.MatchString(id) {
		writeError(w, http.StatusBadRequest, "order id must be 1 to 64 letters, digits, '-' or '_'", nil)
		return "", false
	}
	return id, true
}

func (a *app) createOrder(w http.ResponseWriter, r *http.Request) {
	id, ok := orderID(w, r)
	if !ok {
		return
	}
	var body struct {
		AmountCents int64 `json:"amount_cents"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || body.AmountCents <= 0 {
		writeError(w, http.StatusBadRequest, `body must be {"amount_cents": N} with N > 0`, nil)
		return
	}
	o, created, err := a.store.create(r.Context(), id, body.AmountCents)
	switch {
	case errors.Is(err, errAmountDiffers):
		writeError(w, http.StatusConflict, errAmountDiffers.Error(), &o)
	case err != nil:
		a.internalError(w, "create order", id, err)
	case created:
		writeJSON(w, http.StatusCreated, o)
	default:
		writeJSON(w, http.StatusOK, o)
	}
}

func (a *app) getOrder(w http.ResponseWriter, r *http.Request) {
	id, ok := orderID(w, r)
	if !ok {
		return
	}
	o, err := a.store.get(r.Context(), id)
	switch {
	case errors.Is(err, errNotFound):
		writeError(w, http.StatusNotFound, errNotFound.Error(), nil)
	case err != nil:
		a.internalError(w, "get order", id, err)
	default:
		writeJSON(w, http.StatusOK, o)
	}
}

// validRequestKey is what an Idempotency-Key may be.
var validRequestKey = regexp.MustCompile(`^[\x21-\x7e]{1,255}$`)

func (a *app) payOrder(w http.ResponseWriter, r *http.Request) {
	id, ok := orderID(w, r)
	if !ok {
		return
	}
	// A client that did not get the answer (a timeout, a dropped
	// connection) sends the same request again with the same key and gets
	// the first answer instead of "already paid".
	requestKey := r.Header.Get("Idempotency-Key")
	if requestKey != "" && !validRequestKey.MatchString(requestKey) {
		writeError(w, http.StatusBadRequest, "Idempotency-Key must be 1 to 255 printable ASCII characters without spaces", nil)
		return
	}
	key := lockKey(id)
	// Acquire is retried (retry.Do) when the cluster changes leader under it
	// (ErrIndeterminate, ErrUnavailable): marked idempotent because a grant
	// made for a lost request is never used, so asking again can at worst
	// wait behind it until its lease ends. Capacity rejects are retried with
	// the slow backoff; everything else, such as ErrNotAcquired, is final.
	actx, cancel := context.WithTimeout(r.Context(), a.acquireTimeout)
	var t *ticketing.Ticket
	err := retry.Do(actx, func(ctx context.Context) (err error) {
		t, err = a.broker.Acquire(ctx, key, acquireWait, a.lease, a.budget)
		return err
	}, retry.Idempotent(true))
	cancel()
	if err != nil {
		// Not granted (busy, server limit, outcome unknown, no leader...):
		// the payment was not attempted, the client may try again.
		a.log.Warn("order ticket not acquired", "order", id, "err", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "the order is busy or Ticketing is unavailable; try again", nil)
		return
	}
	defer t.Close() // backstop; Release below is the normal path

	// The transaction must be over before the lease can be: past the
	// ticket's conservative deadline another instance may hold the key. (The
	// fence would reject the write anyway; this just stops waiting early.)
	ctx, cancel := context.WithDeadline(r.Context(), t.Deadline())
	o, err := a.store.pay(ctx, id, t.Token(), a.instance, requestKey)
	cancel()
	// Commit first, then release.
	if rerr := t.Release(context.WithoutCancel(r.Context())); rerr != nil {
		a.log.Warn("release order ticket", "order", id, "token", t.Token(), "err", rerr)
	}

	switch {
	case err == nil:
		a.log.Info("order paid", "order", id, "token", t.Token())
		writeJSON(w, http.StatusOK, o)
	case errors.Is(err, errAlreadyPaid):
		writeError(w, http.StatusConflict, errAlreadyPaid.Error(), &o)
	case errors.Is(err, errNotFound):
		writeError(w, http.StatusNotFound, errNotFound.Error(), nil)
	case errors.Is(err, fence.ErrStaleToken):
		// Our lease ended mid-way and another holder has written since:
		// nothing of ours was recorded; what happened is in the order.
		a.log.Warn("payment rejected by the fence", "order", id, "err", err)
		writeError(w, http.StatusConflict, "this request lost the order's ticket to another one; fetch the order", nil)
	case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
		// Includes a COMMIT that lost the race with the deadline (the store
		// reports the rollback as the deadline, not as sql.ErrTxDone).
		a.log.Warn("payment ran out of lease", "order", id, "token", t.Token(), "err", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "the database was too slow; try again", nil)
	default:
		a.internalError(w, "pay order", id, err)
	}
}

func (a *app) internalError(w http.ResponseWriter, what, id string, err error) {
	a.log.Error(what, "order", id, "err", err)
	writeError(w, http.StatusInternalServerError, "internal error", nil)
}

type errorBody struct {
	Error string `json:"error"`
	Order *Order `json:"order,omitempty"`
}

func writeError(w http.ResponseWriter, status int, msg string, o *Order) {
	writeJSON(w, status, errorBody{Error: msg, Order: o})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(v)
	_, _ = w.Write(append(b, '\n'))
}
