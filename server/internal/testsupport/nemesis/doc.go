// Package nemesis is a Jepsen-style fault-injection harness for ticketd
// (docs/reliability.md has the fault matrix and results).
//
// Topology (Linux, root, iproute2): a bridge in the root namespace holding
// 10.77.S.1/24 (S chosen free on this machine) and one network namespace per
// server, joined to the bridge by a veth pair, the server's end holding
// 10.77.S.(10+i). The namespaces have no default route, so nothing in them
// reaches anything outside the subnet. In its namespace each ticketd listens
// on loopback only (client 5225, Raft 5226, HTTP 5227); a fault-injecting
// TCP proxy run by the harness listens on the server's bridge address for
// the client port and for the Raft port, and those proxies are the
// addresses the server advertises: every client connection and every Raft
// connection between servers crosses the veth links and a proxy. The
// harness's client workers (the Go client, one Broker each) run in the root
// namespace and reach the servers over the bridge. A third, unfaulted proxy
// on the root namespace's loopback serves the harness's own status requests.
//
// Faults (FaultKind): partitions are blackhole routes inside a namespace (a
// server drops what it sends to an address: one direction; both sides for a
// symmetric cut); link faults are the proxies' modes (delay with jitter,
// stall, cut and refuse); process faults are signals (SIGKILL, SIGSTOP and
// SIGCONT, SIGTERM for rolling restarts); the stall-after-commit fault uses
// ticketd's stall hook (package stallhook, built in with -tags stallhook,
// which BuildTicketd sets) to stop the leader's core between a commit and
// its answer. The kernel here has no netem, so
// there is no packet-level loss or delay; a stall is the proxy holding every
// byte while the connection stays open.
//
// Every request is recorded with its invocation and completion times on the
// harness's monotonic clock and its outcome (Op); Check then verifies that
// no two holders' conservative intervals overlap on a key, that tokens never
// repeat and grow in real-time order, that no acknowledged grant or release
// is lost, and that each key's history is linearizable (porcupine, with a
// model that knows a lease may end only after the holder's conservative
// deadline). Liveness figures come from the same history.
//
// With Config.Coord, a coordination workload runs beside the tickets one
// (CoordWorkload): 12 sessions of the coordination SDK, a third each in the
// two client groups' namespaces and in the root namespace, take turns on a
// limit-1 and a limit-3 semaphore and an Election, and now and then one is
// abandoned while it holds (its connection goes silent, it never dials
// again). CheckCoord then verifies, from the clients' view — a hold lasts
// from the grant's return to the end of its lease's context, or to the
// release — that no semaphore ever had more units held than its limit, the
// election never two leaders, order ids never went backwards, no call
// returned more than 100 ms after its context ended, and every session the
// client gave up left the server within CoordConfig.ExpiryBound (an
// observer lists the node's sessions through the unfaulted control path).
//
// Run is a whole run (cmd/ticketjepsen runs it by hand, -coord for the
// coordination workload); TestShortRun is the CI run of the tickets
// workload with every fault kind, TestCoordPartitions the CI run of the
// coordination workload with the coordination faults (CoordFaults);
// TICKETING_NEMESIS_COORD_RUNS=N makes it N runs of
// 120 s of them (docs/reliability.md). All need root: without it they fail
// with ErrNotRoot, and without ip with ErrNoIP (test.sh installs iproute2).
package nemesis
