// Package crashtest holds process-level tests of ticketd: the command is built
// once per test run and started as separate processes on loopback, which the
// tests kill with SIGKILL under load, restart, and check.
//
// What the tests check after every restart:
//
//   - every grant a client saw acknowledged (G) and did not release is still
//     held under exactly that token (leases are 250 s, so nothing expires);
//   - every release a client saw acknowledged (R) is in effect;
//   - every grant's token is larger than every token any client saw before the
//     acquire was sent (so tokens keep increasing across restarts);
//   - an operation whose answer was lost (indeterminate) is either fully in
//     effect or not at all, and no key is held by an owner nobody asked for;
//   - the server starts on its data directory without manual repair.
//
// The whole acquire/release/describe history is also checked for
// linearizability against a one-key model with porcupine.
//
// A corrupted or truncated Raft log (the log store in raft/wal, or the
// raft/raft.db of the last version before it, which ticketd migrates) must
// make ticketd refuse to start with a clear error naming the file, or
// recover the correct state; it must never serve a wrong state. The upgrade
// tests build earlier versions of ticketd from this repository's history.
//
// The default schedule is short (5 kill cycles on one node, 4 on a
// three-node cluster: leader, follower, leader, leader), for CI.
// TICKETING_CRASH_CYCLES=N runs N cycles of each (30 % of them follower
// kills beyond 6); TICKETING_CRASH_SEED=S repeats a run's random choices;
// TICKETING_CRASH_RACE=1 builds ticketd with the race detector. Each server's
// log is kept per start in the test's temporary directory, and the last
// lines are printed when a test fails. -short skips every test that starts
// processes (and the build).
package crashtest
