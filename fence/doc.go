// Package fence makes database writes safe against Ticketing ticket holders
// that outlived their lease.
//
// A Ticketing ticket carries a fencing token that strictly increases per key.
// A holder can pause (GC, swap, a network partition) past its lease while
// another client acquires the key with a higher token; when the first holder
// resumes, it still believes it holds the ticket. The token protects the
// data only if the database itself refuses writes with a token lower than
// one it has already seen, in the same transaction as the write. That is
// what Check does: it keeps one row per fenced key holding the highest token
// seen (the mark), and inside the caller's transaction either raises the
// mark or fails with ErrStaleToken. The mark, the check and the business
// write commit or roll back together.
//
// The whole pattern, with the Ticketing client:
//
//	f, err := fence.New(fence.Postgres, fence.WithTable("ticket_fence"))
//	if err != nil { ... }
//	if err := f.CreateTable(ctx, db); err != nil { ... } // once, at setup
//
//	b, err := ticketing.Connect("127.0.0.1:5225")
//	t, err := b.Acquire(ctx, "account/42", wait, lease, budget)
//	if err != nil { ... }
//	defer t.Release(ctx)
//
//	tx, err := db.BeginTx(ctx, nil)
//	if err != nil { ... }
//	defer tx.Rollback() // a no-op after Commit
//	if err := f.Check(ctx, tx, "account/42", t.Token()); err != nil {
//		return err // errors.Is(err, fence.ErrStaleToken): we lost the ticket
//	}
//	// Read what the write depends on here, after Check, in the same
//	// transaction: the fence orders writes, not reads made before it.
//	if _, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance + $1 WHERE id = 42", amount); err != nil {
//		return err
//	}
//	if err := tx.Commit(); err != nil {
//		return err
//	}
//	// t.Release runs here, after the commit.
//
// The fence orders writes by token; it cannot vouch for data read before
// Check. A holder that read a balance, then checked and wrote it back, may
// overwrite an older holder's write that committed in between (with a
// smaller token, accepted because no larger one was stored yet). So read
// every value the write depends on inside the fenced transaction, after
// Check (internal/e2e TestFenceOrdersWritesNotEarlierReads shows both cases).
//
// With native pgx use f.CheckPgx(ctx, pgxTx, key, token). To retry
// transactions that fail for transient reasons, wrap the transaction in
// retry.Do; ErrStaleToken is never retried.
//
// # Dialects and concurrency
//
// Two transactions checking the same key with the same token can never both
// succeed, whatever the interleaving:
//
//   - PostgreSQL: one INSERT ... ON CONFLICT DO UPDATE ... WHERE mark < token.
//     The second transaction waits for the first's row lock. Under READ
//     COMMITTED it then re-checks the condition against the committed mark
//     and changes nothing; under REPEATABLE READ or SERIALIZABLE it fails
//     with SQLSTATE 40001, which retry re-runs.
//   - MySQL and MariaDB (InnoDB): an INSERT ... ON DUPLICATE KEY UPDATE that
//     creates the row if needed and takes its exclusive lock, then a
//     conditional UPDATE, which reads the latest committed mark whatever the
//     isolation level. Deadlocks between concurrent first inserts of a key
//     surface as error 1213, which retry re-runs. Keys are stored as
//     VARBINARY(767), compared byte for byte; longer keys are refused.
//   - SQLite: the same upsert as PostgreSQL. SQLite admits one writer at a
//     time, and a transaction whose snapshot predates another's commit gets
//     SQLITE_BUSY instead of writing (retry re-runs it). Use a busy timeout.
//
// Tokens are uint64 but stored in a signed 64-bit column: tokens of 2^63 and
// above are refused with ErrInvalid.
//
// # Tests
//
// Every dialect's tests always run, none skips: PostgreSQL is started by
// internal/pgtest, MariaDB by internal/mysqltest (or the tests use the
// server named by TICKETING_TEST_MYSQL_DSN, for example
// root@tcp(127.0.0.1:3306)/test), SQLite is in-process.
package fence
