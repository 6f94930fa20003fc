// Package retry re-runs whole database transactions that failed for a
// transient reason. It ports the YDB Spring retry policy: errors are sorted
// into status classes, and each class is either always retried, retried only
// for idempotent calls, or never retried, with a fast, slow or zero backoff.
//
//	err := retry.Do(ctx, func(ctx context.Context) error {
//		tx, err := db.BeginTx(ctx, nil)
//		if err != nil {
//			return err
//		}
//		defer tx.Rollback()
//		if err := f.Check(ctx, tx, key, token); err != nil {
//			return err // fence.ErrStaleToken is never retried
//		}
//		if _, err := tx.ExecContext(ctx, "UPDATE ...", ...); err != nil {
//			return err
//		}
//		return tx.Commit()
//	}, retry.Idempotent(true))
//
// # Classes
//
//	class                      retried             backoff
//	ABORTED                    always              fast
//	UNAVAILABLE                always              fast
//	OVERLOADED                 always              slow
//	CLIENT_RESOURCE_EXHAUSTED  always              slow
//	BAD_SESSION                always              none
//	UNDETERMINED               if idempotent       fast
//	TRANSPORT_UNAVAILABLE      if idempotent       fast
//	CLIENT_TRANSPORT_ERROR     if idempotent       fast   (YDB's CLIENT_GRPC_ERROR)
//	SESSION_EXPIRED            if idempotent       none
//	anything else              never
//
// Classify maps errors to classes: errors implementing RetryClasser (the
// Ticketing client's errors do, and so do fence's refusals,
// PRECONDITION_FAILED, and coordination status errors, each the class of
// the same-named status), PostgreSQL SQLSTATEs, MySQL error numbers,
// SQLite busy/locked codes, and network errors. Timeouts, cancellation,
// precondition failures such as a stale fencing token, not-found and invalid
// arguments are never retried.
//
// # Backoff
//
// Before retry n the ceiling is base·2^(n-1), capped. The fast tier (base
// 5ms, cap 500ms) waits a uniform time in [0, ceiling) ("full jitter": best
// at spreading out clients that conflict with each other); the slow tier
// (base 50ms, cap 5s) waits in [ceiling/2, ceiling) ("equal jitter": an
// overloaded server is guaranteed at least half the ceiling of relief).
// Zero-backoff classes retry at once. By default at most 10 attempts are
// made, including the first. Cancelling the context stops retrying at once, also
// in the middle of a backoff wait.
//
// # Configuration
//
// The package-level Do uses DefaultConfig. A Policy takes a *Config (nil
// means the defaults); ConfigFromEnv builds one from the environment, which
// nothing reads unless asked:
//
//	cfg, err := retry.ConfigFromEnv()
//	if err != nil {
//		return err // names the malformed variable
//	}
//	p := retry.Policy{Config: &cfg}
//	err = p.Do(ctx, body)
//
// The variables and their defaults:
//
//	TICKETING_RETRY_ENABLED       true   false disables retrying
//	TICKETING_RETRY_MAX_ATTEMPTS  10     attempts including the first
//	TICKETING_RETRY_FAST_BASE     5ms    durations: Go syntax, or an integer
//	TICKETING_RETRY_FAST_CAP      500ms  of milliseconds
//	TICKETING_RETRY_SLOW_BASE     50ms
//	TICKETING_RETRY_SLOW_CAP      5s
//
// Global settings are taken literally, 0 included: a maximum of 0 attempts
// (like 1) runs the body once, a base or cap of 0 retries that tier without
// delay. An unset (or empty) variable keeps its default.
//
// Options override the global values for one call: zero means "use the
// global value" and a negative value is rejected with ErrInvalidConfig.
// Enabled(false) turns retrying off for the call; Enabled(true) cannot turn
// on retrying that is disabled globally. Idempotent(true) widens the set of
// retried classes.
//
// # Nesting
//
// Only the outermost Do retries. Nesting is detected per context, not per
// goroutine or transaction: Do marks the context it hands the body, and a Do
// called with that context (or one derived from it) runs its body once and
// returns the body's error unchanged, so that the outer call re-runs the
// whole transaction rather than a part of it. That is right for a body that
// joins the outer transaction (Spring's REQUIRED).
//
// An inner transaction of its own (Spring's REQUIRES_NEW: its own BEGIN and
// COMMIT, on another connection) is not retried by itself either when its
// Do is given the body's context or any context derived from it
// (context.WithoutCancel included: values are inherited): its transient
// failure fails the outer body, and the outer Do re-runs everything, the
// inner transaction included. If the inner transaction had committed
// before the outer body failed, that re-run commits it again, so it must be
// idempotent (or fenced). To retry the inner transaction by itself, give
// its Do Independent(ctx): the inner Do then retries as an outermost one,
// and when it gives up, its *Error is NonRetryable, so the outer Do does
// not multiply its attempts.
//
// # Refused connections and COMMIT
//
// A connection refused at dial time (ECONNREFUSED) sent nothing, so it is
// UNAVAILABLE and always retried. A connection lost while COMMIT is in
// flight leaves the outcome unknown (the server may have committed): the
// drivers report it as "conn closed" (pgx, also through database/sql),
// "invalid connection" (go-sql-driver/mysql), a reset or an unexpected EOF,
// all classified as transport errors, retried only with Idempotent(true).
// A fenced transaction re-run that way finds its own token already stored
// and gets fence.ErrTokenCommitted: its work is done.
package retry
