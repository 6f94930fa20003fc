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
// mark or refuses the token. The mark, the check and the business write
// commit or roll back together.
//
// # What the fence guarantees, and what it does not
//
// It guarantees that the fenced transactions of one key commit in token
// order: a transaction whose Check passed holds the key's fence row until
// it commits or rolls back, so the next one waits, and once a token has been
// stored no transaction with a smaller token can pass Check (ErrStaleToken)
// and none with the same token can pass again (ErrTokenCommitted). A stale
// write is refused once a newer token has been stored. It does not
// guarantee that the protected work runs at most once, nor that a holder's
// transaction ends before its lease does: a holder that passed Check and
// then paused before COMMIT still commits when it resumes, even though its
// lease ended and the next holder was granted the key meanwhile. The next
// holder's Check waits for that row lock for the whole pause, then passes
// with its larger token, so both holders' writes are applied, in token
// order, and nothing is overwritten out of order; but both ran. A Ticketing
// ticket is not "run once". Work that must happen at most once needs its
// own record, written in the same fenced transaction and protected by a
// unique constraint (one row per job run), and server-side timeouts bound
// the pause-after-check window (see Bounding the window below).
//
// The whole pattern, with the Ticketing client:
//
//	f, err := fence.New(fence.Postgres, fence.WithTable("ticket_fence"))
//	if err != nil { ... }
//	if err := f.CreateTable(ctx, db); err != nil { ... } // at setup; safe from several instances at once
//
//	t, err := b.Acquire(ctx, "invoices/2026-11-30", wait, lease, budget)
//	if err != nil { ... } // not acquired: do not do the work
//	defer t.Close()      // backstop; Release below is the normal path
//
//	// The transaction must end before the lease can: the ticket's context
//	// is done at its conservative deadline (or when the ticket is lost).
//	// It cannot stop a paused process; the server-side timeouts below can.
//	tctx, cancel := t.Context(ctx)
//	defer cancel()
//	tx, err := db.BeginTx(tctx, nil)
//	if err != nil { ... }
//	defer tx.Rollback() // a no-op after Commit
//	switch err := f.CheckTicket(tctx, tx, t); {
//	case errors.Is(err, fence.ErrTokenCommitted):
//		return nil // our earlier attempt committed (its reply was lost): the work is done
//	case err != nil:
//		return err // fence.ErrStaleToken: a newer holder has committed; change nothing
//	}
//	// The job's own record: a second run of the same night inserts nothing.
//	res, err := tx.ExecContext(tctx, "INSERT INTO invoice_runs (night, token) VALUES ($1, $2) ON CONFLICT (night) DO NOTHING", night, int64(t.Token()))
//	if err != nil { ... }
//	if n, _ := res.RowsAffected(); n == 0 {
//		return nil // this night's invoices were already done, by whoever held the key before
//	}
//	// Read what the write depends on here, after Check, in the same
//	// transaction: the fence orders writes, not reads made before it.
//	if _, err := tx.ExecContext(tctx, "INSERT INTO invoices ...", ...); err != nil {
//		return err
//	}
//	if err := tx.Commit(); err != nil {
//		return err
//	}
//	return t.Release(ctx) // after the commit; its error says whether the ticket was still held
//
// CheckTicket takes the key and token from the ticket (any value with
// Key() string and Token() uint64, such as *ticketing.Ticket; this package
// does not import the client). Check(ctx, tx, key, token) is the same with
// the key and token given separately, for a token persisted elsewhere. With
// native pgx use the fence/pgxfence module (CheckTicket, Check
// and CreateTable there); another driver can implement Tx and call CheckTx.
//
// # The two refusals
//
//   - ErrStaleToken (a *StaleError, Mark > Token): a later holder of the key
//     has committed a fenced transaction; this holder's lease is over. Roll
//     back. Whether the work still needs doing is the application's call:
//     look at the job's own record (the later holder may have done it), and
//     if it is still to do, acquire a new ticket and run it again.
//   - ErrTokenCommitted (a *TokenCommittedError): the stored mark is this
//     very token, so a transaction fenced with this ticket has already
//     committed on this key. Typically an earlier attempt whose COMMIT
//     succeeded but whose reply was lost (a connection cut during COMMIT),
//     re-run by retry.Do with retry.Idempotent(true). Roll back and do not
//     redo the work under a new ticket: it is done; read what was committed
//     and answer from it. It does not wrap ErrStaleToken, so code written to
//     redo stale work never redoes work already done. It is also what a
//     second, separate transaction fenced with the same ticket and key gets:
//     fence each unit of work under its own key, or in one transaction.
//
// Neither is retried by package retry (both are NonRetryable). Any other
// error from Check (the database's, including one met while reading the
// mark to tell the two refusals apart) matches neither and says nothing
// about the token: roll back; package retry re-runs the transaction when
// the error's class allows, and the re-run's Check tells.
//
// The fence orders writes by token; it cannot vouch for data read before
// Check. A holder that read a balance, then checked and wrote it back, may
// overwrite an older holder's write that committed in between (with a
// smaller token, accepted because no larger one was stored yet). So read
// every value the write depends on inside the fenced transaction, after
// Check (server/internal/testsupport/e2e TestFenceOrdersWritesNotEarlierReads shows both cases).
//
// # Bounding the window
//
// A holder paused after Check keeps the key's fence row locked, and a paused
// client cannot run its own timers, so the bound must come from the
// database server:
//
//   - PostgreSQL: idle_in_transaction_session_timeout ends a session that
//     sits idle inside a transaction longer than that (the paused holder's
//     transaction is rolled back and its COMMIT fails with SQLSTATE 25P03
//     or a closed connection), which frees the row for the next holder;
//     statement_timeout
//     bounds a single statement. lock_timeout bounds how long the next
//     holder's Check waits for the row: it then fails with SQLSTATE 55P03,
//     which package retry re-runs. Set them per role or per session, for
//     example ALTER ROLE app SET idle_in_transaction_session_timeout =
//     '10s', or SET lock_timeout = '5s' on the connection; keep the idle
//     timeout shorter than the lease.
//   - MariaDB: idle_transaction_timeout (seconds) plays the role of
//     idle_in_transaction_session_timeout (the server closes the
//     connection; the paused holder's COMMIT fails with the driver's "bad
//     connection"); MySQL has no per-transaction
//     idle timeout, and wait_timeout (seconds, any idle session) is the
//     nearest. innodb_lock_wait_timeout (seconds) bounds the wait for the
//     row: error 1205, which package retry re-runs; max_statement_time
//     (MariaDB) and max_execution_time (MySQL, SELECT only) bound a
//     statement.
//
// These bound how long the next holder can be blocked and end the paused
// transaction, but a holder that resumes before the timeout still commits
// after its lease ended: only the job's own record (above) makes the work
// run at most once.
//
// # The table
//
// CreateTable creates the table if it does not exist; DDL returns the
// statement for a migration tool to run instead. For the default table name
// they are:
//
//	PostgreSQL:
//	CREATE TABLE IF NOT EXISTS ticketing_fence (fence_key text PRIMARY KEY, token bigint NOT NULL)
//
//	MySQL and MariaDB:
//	CREATE TABLE IF NOT EXISTS ticketing_fence (fence_key VARBINARY(767) NOT NULL PRIMARY KEY, token BIGINT NOT NULL) ENGINE=InnoDB
//
//	SQLite:
//	CREATE TABLE IF NOT EXISTS ticketing_fence (fence_key TEXT NOT NULL PRIMARY KEY, token INTEGER NOT NULL) WITHOUT ROWID
//
// CreateTable is safe to call from several instances at once. On PostgreSQL
// it runs the statement under a transaction-scoped advisory lock
// (pg_advisory_xact_lock(0x7469636b, hashtext(table name))), because two
// sessions running CREATE TABLE IF NOT EXISTS at once can fail with a
// unique violation in the catalog; a migration tool running DDL itself
// should run it from one place. On MySQL and MariaDB the table name's
// metadata lock serialises concurrent creation (and DDL commits any open
// transaction); on SQLite, one writer at a time does, given a busy timeout.
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
// server/internal/testsupport/pgtest, MariaDB by server/internal/testsupport/mysqltest (or the tests use the
// server named by TICKETING_TEST_MYSQL_DSN, for example
// root@tcp(127.0.0.1:3306)/test), SQLite is in-process.
package fence
