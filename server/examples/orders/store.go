package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ticketing-io/ticketing/fence"
	"github.com/ticketing-io/ticketing/retry"
)

// Order is an order as stored and as served.
type Order struct {
	ID          string     `json:"id"`
	AmountCents int64      `json:"amount_cents"`
	Status      string     `json:"status"`               // "new" or "paid"
	PaidBy      string     `json:"paid_by,omitempty"`    // the instance that recorded the payment
	PaidToken   uint64     `json:"paid_token,omitempty"` // the fencing token it held
	PaidAt      *time.Time `json:"paid_at,omitempty"`
}

var (
	errNotFound      = errors.New("order not found")
	errAlreadyPaid   = errors.New("order already paid")
	errAmountDiffers = errors.New("order exists with a different amount")
)

// schema is created at start, next to the fence's table. payments is the
// ledger: one row per payment recorded, which is what must never double.
// The fence and the status check keep it to one row per order; the unique
// index is the backstop that holds even for a writer that bypasses both.
// request_key is the client's Idempotency-Key of the request that paid.
const schema = `
CREATE TABLE IF NOT EXISTS orders (
	id           text        PRIMARY KEY,
	amount_cents bigint      NOT NULL CHECK (amount_cents > 0),
	status       text        NOT NULL DEFAULT 'new' CHECK (status IN ('new', 'paid')),
	paid_by      text,
	paid_token   bigint,
	paid_at      timestamptz
);
CREATE TABLE IF NOT EXISTS payments (
	id           bigserial   PRIMARY KEY,
	order_id     text        NOT NULL REFERENCES orders (id),
	amount_cents bigint      NOT NULL,
	instance     text        NOT NULL,
	token        bigint      NOT NULL,
	created_at   timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE payments ADD COLUMN IF NOT EXISTS request_key text;
CREATE UNIQUE INDEX IF NOT EXISTS payments_one_per_order ON payments (order_id)`

// schemaLock is a PostgreSQL advisory lock id: instances starting together
// create the tables one after the other (CREATE TABLE IF NOT EXISTS can fail
// when two sessions race).
const schemaLock = 0x6f7264657273 // "orders"

const orderColumns = `id, amount_cents, status, paid_by, paid_token, paid_at`

type store struct {
	db    *sql.DB
	fence *fence.Fence
	// beforeCommit, if set, runs just before COMMIT (tests use it to lose
	// the race with the deadline).
	beforeCommit func(ctx context.Context, tx *sql.Tx)
}

// openStore creates the tables if needed.
func openStore(ctx context.Context, db *sql.DB) (*store, error) {
	f, err := fence.New(fence.Postgres)
	if err != nil {
		return nil, err
	}
	s := &store{db: db, fence: f}
	err = retry.Do(ctx, func(ctx context.Context) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLock); err != nil {
			return err
		}
		if err := f.CreateTable(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, schema); err != nil {
			return err
		}
		return tx.Commit()
	}, retry.Idempotent(true))
	if err != nil {
		return nil, fmt.Errorf("create tables: %w", err)
	}
	return s, nil
}

// lockKey is the ticket key, and the fence key, of an order.
func lockKey(id string) string { return "order-" + id }

type scanner interface{ Scan(dest ...any) error }

func scanOrder(row scanner) (Order, error) {
	var o Order
	var paidBy sql.NullString
	var paidToken sql.NullInt64
	var paidAt sql.NullTime
	err := row.Scan(&o.ID, &o.AmountCents, &o.Status, &paidBy, &paidToken, &paidAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Order{}, errNotFound
	}
	if err != nil {
		return Order{}, err
	}
	o.PaidBy, o.PaidToken = paidBy.String, uint64(paidToken.Int64)
	if paidAt.Valid {
		t := paidAt.Time.UTC()
		o.PaidAt = &t
	}
	return o, nil
}

// create inserts a new order. Creating an order that exists with the same
// amount is not an error (created is false then), so a client may retry.
func (s *store) create(ctx context.Context, id string, amountCents int64) (o Order, created bool, err error) {
	err = retry.Do(ctx, func(ctx context.Context) error {
		o, err = scanOrder(s.db.QueryRowContext(ctx,
			`INSERT INTO orders (id, amount_cents) VALUES ($1, $2)
			 ON CONFLICT (id) DO NOTHING RETURNING `+orderColumns, id, amountCents))
		if err == nil {
			created = true
			return nil
		}
		if !errors.Is(err, errNotFound) {
			return err
		}
		created = false
		o, err = scanOrder(s.db.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1`, id))
		return err
	}, retry.Idempotent(true))
	if err == nil && o.AmountCents != amountCents {
		return o, false, errAmountDiffers
	}
	return o, created, err
}

// get reads an order.
func (s *store) get(ctx context.Context, id string) (o Order, err error) {
	err = retry.Do(ctx, func(ctx context.Context) error {
		o, err = scanOrder(s.db.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1`, id))
		return err
	}, retry.Idempotent(true))
	return o, err
}

// pay records the payment of an order by the holder of its ticket with the
// given token, in one transaction fenced with that token: a holder whose
// lease ran out and whose key went to someone else is rejected with
// fence.ErrStaleToken, and changes nothing.
//
// requestKey is the client's Idempotency-Key ("" for none). Paying an order
// that a request with the same key already paid is answered with the order
// (the first request's answer, its response may have been lost); paying it
// with another key, or none, is errAlreadyPaid.
//
// The transaction is retried (retry.Do) on transient errors, including
// those after which it is unknown whether the commit happened: a fenced
// transaction is safe to run again, because if the earlier attempt did
// commit, it stored this very token as the key's mark and the check of the
// rerun fails with fence.ErrTokenCommitted ("already done"), which is
// answered with the order as the earlier attempt left it.
func (s *store) pay(ctx context.Context, id string, token uint64, instance, requestKey string) (o Order, err error) {
	key := lockKey(id)
	err = retry.Do(ctx, func(ctx context.Context) error {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := s.fence.Check(ctx, tx, key, token); err != nil {
			if errors.Is(err, fence.ErrTokenCommitted) {
				// Our own earlier attempt committed: answer with its result.
				o, err = scanOrder(tx.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1`, id))
				return err
			}
			return err
		}
		// Read after the check, in the same transaction: the check holds the
		// key's fence row lock, so no other fenced writer of this order can
		// commit between this read and the commit below.
		o, err = scanOrder(tx.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM orders WHERE id = $1`, id))
		if err != nil {
			return err
		}
		if o.Status == "paid" {
			var paidKey sql.NullString
			err := tx.QueryRowContext(ctx, `SELECT request_key FROM payments WHERE order_id = $1`, id).Scan(&paidKey)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			if requestKey != "" && paidKey.Valid && paidKey.String == requestKey {
				return nil // a repeat of the request that paid: its answer again
			}
			return errAlreadyPaid
		}
		var rk sql.NullString
		if requestKey != "" {
			rk = sql.NullString{String: requestKey, Valid: true}
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO payments (order_id, amount_cents, instance, token, request_key) VALUES ($1, $2, $3, $4, $5)`,
			id, o.AmountCents, instance, int64(token), rk); err != nil {
			var pg interface{ SQLState() string }
			if errors.As(err, &pg) && pg.SQLState() == "23505" {
				// The unique backstop: a payment exists that the order's
				// status does not show (written around the fence).
				return fmt.Errorf("%w (the payments ledger already has one)", errAlreadyPaid)
			}
			return err
		}
		o, err = scanOrder(tx.QueryRowContext(ctx,
			`UPDATE orders SET status = 'paid', paid_by = $2, paid_token = $3, paid_at = now()
			 WHERE id = $1 RETURNING `+orderColumns, id, instance, int64(token)))
		if err != nil {
			return err
		}
		if s.beforeCommit != nil {
			s.beforeCommit(ctx, tx)
		}
		if err := tx.Commit(); err != nil {
			if errors.Is(err, sql.ErrTxDone) && ctx.Err() != nil {
				// The deadline (the ticket's) passed before COMMIT, and
				// database/sql rolled the transaction back: nothing was
				// recorded. Say so with the context's error, which maps to
				// "try again", not an internal error.
				return fmt.Errorf("commit: the transaction was rolled back at the deadline: %w", ctx.Err())
			}
			return err
		}
		return nil
	}, retry.Idempotent(true))
	return o, err
}
