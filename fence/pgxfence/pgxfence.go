// Package pgxfence fences PostgreSQL writes made through native pgx
// (github.com/jackc/pgx/v5) rather than database/sql. It lives in its own
// module so that users of the fence package with database/sql do not pull
// pgx into their builds.
//
// A fence made with fence.New(fence.Postgres, ...) is used as it is:
//
//	f, _ := fence.New(fence.Postgres)
//	if err := pgxfence.CreateTable(ctx, f, pool); err != nil { ... }
//	tx, _ := pool.Begin(ctx)
//	defer tx.Rollback(ctx)
//	if err := pgxfence.CheckTicket(ctx, f, tx, ticket); err != nil {
//		return err // fence.ErrStaleToken, fence.ErrTokenCommitted or the database's error
//	}
//	// ... the fenced writes, then tx.Commit(ctx)
package pgxfence

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ticketing-io/ticketing/fence"
)

// Execer is what CreateTable needs: *pgx.Conn, pgx.Tx and *pgxpool.Pool
// have it.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// CreateTable is fence.Fence.CreateTable for native pgx.
func CreateTable(ctx context.Context, f *fence.Fence, db Execer) error {
	if err := postgres(f); err != nil {
		return err
	}
	return f.CreateTableFunc(ctx, func(ctx context.Context, q string) error {
		_, err := db.Exec(ctx, q)
		return err
	})
}

// Check is fence.Fence.Check for a native pgx transaction.
func Check(ctx context.Context, f *fence.Fence, tx pgx.Tx, key string, token uint64) error {
	if err := postgres(f); err != nil {
		return err
	}
	if tx == nil {
		return fmt.Errorf("%w: nil transaction", fence.ErrInvalid)
	}
	return f.CheckTx(ctx, pgxTx{tx}, key, token)
}

// CheckTicket is fence.Fence.CheckTicket for a native pgx transaction: the
// key and token come from t, so that a token cannot be checked against
// another key by mistake.
func CheckTicket(ctx context.Context, f *fence.Fence, tx pgx.Tx, t fence.Ticket) error {
	if err := postgres(f); err != nil {
		return err
	}
	if tx == nil {
		return fmt.Errorf("%w: nil transaction", fence.ErrInvalid)
	}
	return f.CheckTicketTx(ctx, pgxTx{tx}, t)
}

func postgres(f *fence.Fence) error {
	if f == nil {
		return fmt.Errorf("%w: nil fence", fence.ErrInvalid)
	}
	if d := f.Dialect(); d != fence.Postgres {
		return fmt.Errorf("%w: pgx needs the postgres dialect, not %v", fence.ErrInvalid, d)
	}
	return nil
}

// pgxTx adapts a pgx.Tx to fence.Tx.
type pgxTx struct{ tx pgx.Tx }

func (p pgxTx) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := p.tx.Exec(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (p pgxTx) QueryRow(ctx context.Context, q string, args ...any) fence.Row {
	return p.tx.QueryRow(ctx, q, args...)
}
