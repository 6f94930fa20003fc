// Package e2e holds end-to-end tests that put the pieces together: real
// ticketd servers (internal/testcluster), the Go client, package fence and
// package retry, and a real PostgreSQL (internal/pgtest), used both through
// database/sql (pgx stdlib) and through native pgx.
//
// The tests prove the property the design rests on: a holder whose lease ran
// out while it was paused cannot overwrite the work of the next holder when
// its write is fenced with its token, and does overwrite it when it is not.
// Everything but this comment is in _test.go files.
package e2e
