// Package clienttest holds the Go client's tests that need real servers
// (in-process clusters from testcluster, PostgreSQL): authentication, TLS,
// orphaned grants, the README's walk-through, wrong-port detection and the
// end-to-end flows. They live in the server module so that the client
// module needs nothing but the standard library; the client's own unit
// tests (fake servers, no Raft) stay beside it at the repository root.
package clienttest
