// Package fencetest holds the fence and retry packages' tests that need
// real databases and their drivers: PostgreSQL (database/sql and native pgx
// through fence/pgxfence), MariaDB and SQLite, started by the tests
// themselves (pgtest, mysqltest). They live in the server module so that
// the client module requires no database driver.
package fencetest
