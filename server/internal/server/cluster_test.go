package server_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/node"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

func describe(t *testing.T, r *testcluster.Raw, key string) wire.Frame {
	t.Helper()
	id := r.ID()
	r.Send(&wire.Frame{Type: wire.TypeDescribe, ID: id, Key: []byte(key)})
	return expect(t, r.Final(id), wire.TypeInfo)
}

// helloAny connects to any listed address and follows M hints to the leader.
func helloAny(t *testing.T, addrs []string, start int) *testcluster.Raw {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	addr := addrs[start%len(addrs)]
	for i := start; time.Now().Before(deadline); i++ {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil { // a dead server: try the next address
			addr = addrs[(i+1)%len(addrs)]
			time.Sleep(20 * time.Millisecond)
			continue
		}
		nc.Close()
		r := testcluster.DialRaw(t, addr)
		r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version})
		f, err := r.RecvErr(10 * time.Second)
		if err == nil && f.Type == wire.TypeReady {
			return r
		}
		r.Conn.Close()
		if err == nil && f.Type == wire.TypeNotLeader && len(f.Text) > 0 {
			addr = string(f.Text)
			continue
		}
		addr = addrs[(i+1)%len(addrs)]
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no leader reachable through any address within 30 s")
	return nil
}

func admin(t *testing.T, addr string, req string) (uint16, map[string]any) {
	t.Helper()
	r := testcluster.DialRaw(t, addr)
	r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Flags: wire.HelloAdmin})
	expect(t, r.Recv(), wire.TypeReady)
	id := r.ID()
	r.Send(&wire.Frame{Type: wire.TypeAdmin, ID: id, Text: []byte(req)})
	f := expect(t, r.Final(id), wire.TypeAdminReply)
	var out map[string]any
	if err := json.Unmarshal(f.Text, &out); err != nil {
		t.Fatalf("admin reply %q: %v", f.Text, err)
	}
	return f.Code, out
}

func TestRestartKeepsTicketsAndTokensIncrease(t *testing.T) {
	for _, snap := range []bool{false, true} {
		t.Run(fmt.Sprintf("snapshot=%v", snap), func(t *testing.T) {
			c := testcluster.Start(t, 1, testcluster.WithConfig(func(cfg *server.Config) {
				if snap {
					// Raft's own entry-count check never runs within the test:
					// the snapshot must come from counting operations.
					cfg.SnapshotThreshold = 20
					cfg.SnapshotInterval = time.Hour
					cfg.SnapshotRetain = 1
				}
			}))
			r := testcluster.Hello(t, c.Addr(0), "")
			held := map[string]uint64{}
			var last uint64
			for i := 0; i < 60; i++ {
				key := fmt.Sprintf("k%d", i)
				g := expect(t, r.Final(r.Acquire(key, testcluster.Owner(i), 0, 120)), wire.TypeGranted)
				last = g.Token
				if i%3 == 0 {
					held[key] = g.Token
				} else {
					expect(t, r.Final(r.Release(key, g.Token)), wire.TypeReleased)
				}
			}
			if snap { // wait for a snapshot that compacts the log
				testcluster.WaitFor(t, 20*time.Second, "a snapshot", func() bool {
					return c.Server(0).Raft().Stats()["last_snapshot_index"] != "0"
				})
			}
			c.Kill(0)
			c.Restart(0)
			c.LeaderIndex(t)
			r = testcluster.Hello(t, c.Addr(0), "")
			for key, tok := range held {
				if f := describe(t, r, key); f.Token != tok {
					t.Fatalf("after restart %s has token %d, want %d", key, f.Token, tok)
				}
			}
			g := expect(t, r.Final(r.Acquire("fresh", testcluster.Owner(999), 0, 30)), wire.TypeGranted)
			if g.Token <= last {
				t.Fatalf("token after restart %d not above %d", g.Token, last)
			}
			for key, tok := range held {
				expect(t, r.Final(r.Release(key, tok)), wire.TypeReleased)
			}
		})
	}
}

func TestLeaderKilledWhileHeldAndQueued(t *testing.T) {
	c := testcluster.Start(t, 3)
	l := c.LeaderIndex(t)
	r := testcluster.Hello(t, c.Addr(l), "")
	// h0's short lease is mostly gone when the leader dies: the new leader
	// must restart it in full at takeover. h1..h4's long ones must survive
	// the failover whatever the machine's speed.
	const lease, longLease = 4, 120
	grantedAt := time.Now()
	held := map[string]uint64{}
	var last uint64
	for i := 0; i < 5; i++ {
		key := fmt.Sprintf("h%d", i)
		l := uint8(longLease)
		if i == 0 {
			l = lease
		}
		g := expect(t, r.Final(r.Acquire(key, testcluster.Owner(i), 0, l)), wire.TypeGranted)
		held[key], last = g.Token, g.Token
	}
	w := testcluster.Hello(t, c.Addr(l), "")
	wid := w.Acquire("h0", testcluster.Owner(100), 30, 30)
	expect(t, w.Recv(), wire.TypeQueued)

	// Kill the leader 3 s into h0's 4 s lease: without the takeover rule h0
	// would end about 1 s after the kill.
	testcluster.WaitFor(t, 10*time.Second, "3 s of h0's lease gone", func() bool { return time.Since(grantedAt) > 3*time.Second })
	killedAt := time.Now()
	c.Kill(l)
	// The waiter's connection ends at once, without an answer: its client
	// treats the acquire as indeterminate. (A timeout here would mean the
	// dead leader's client is left waiting.)
	if f, err := w.RecvErr(10 * time.Second); err == nil {
		t.Fatalf("the dead leader's waiter got %s for %d (its acquire %d), want the connection to end", f.Type, f.ID, wid)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the dead leader's waiter connection is still open: %v", err)
	}
	nl := c.LeaderIndex(t)
	if nl == l {
		t.Fatal("killed server still leads")
	}
	// Through any listed address, including the dead one, a client reaches the new leader.
	for start := range c.ClientAddrs() {
		n := helloAny(t, c.ClientAddrs(), start)
		for key, tok := range held {
			f := describe(t, n, key)
			if f.Flags != 1 || f.Token != tok {
				// Only h0 may end, and only a full lease after the kill.
				if key != "h0" || time.Since(killedAt) < lease*time.Second {
					t.Fatalf("%s ended early after failover: %+v (want token %d)", key, f, tok)
				}
			}
			if f.Count != 0 {
				t.Fatalf("%s has %d waiters on the new leader: waiters are not replicated", key, f.Count)
			}
		}
		n.Conn.Close()
	}
	n := helloAny(t, c.ClientAddrs(), nl)
	// A waiter on the new leader is granted only after the full lease,
	// restarted at the takeover, which came after the kill.
	id := n.Acquire("h0", testcluster.Owner(200), 60, 30)
	g := expect(t, n.Final(id), wire.TypeGranted)
	if el := time.Since(killedAt); el < lease*time.Second {
		t.Fatalf("h0 granted again %v after the leader was killed: the new leader did not restart its %d s lease in full", el, lease)
	}
	if g.Token <= last {
		t.Fatalf("token after failover %d not above %d", g.Token, last)
	}
	// The old leader rejoins with its data and catches up.
	c.Restart(l)
	testcluster.WaitFor(t, 20*time.Second, fmt.Sprintf("the restarted server catching up to token %d", g.Token), func() bool {
		return c.Server(l).Status().LastToken >= g.Token
	})
}

func TestAdminStatusAndMembership(t *testing.T) {
	c := testcluster.Start(t, 3)
	l := c.LeaderIndex(t)
	f := (l + 1) % 3
	code, st := admin(t, c.Addr(f), `{"op":"status"}`)
	if code != 0 || st["role"] != "follower" || st["node_id"] != fmt.Sprintf("n%d", f+1) || len(st["members"].([]any)) != 3 {
		t.Fatalf("follower status: %d %v", code, st)
	}
	code, st = admin(t, c.Addr(l), `{"op":"status"}`)
	if code != 0 || st["role"] != "leader" || st["leader_id"] != fmt.Sprintf("n%d", l+1) {
		t.Fatalf("leader status: %d %v", code, st)
	}
	// Leader-only ops on a follower: status 1 with the leader's address
	// (once the follower has applied the leader's takeover entry).
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, st = admin(t, c.Addr(f), `{"op":"members.remove","id":"n9"}`)
		if code != 1 {
			t.Fatalf("members.remove on a follower: %d %v", code, st)
		}
		if st["leader_addr"] == c.Addr(l) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("follower never named the leader: %v", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, st = admin(t, c.Addr(l), `{"op":"members.remove","id":"n9"}`); code != 2 {
		t.Fatalf("removing an unknown member: %d %v", code, st)
	}
	// Remove a follower; the removed server stops being a member.
	if code, st = admin(t, c.Addr(l), fmt.Sprintf(`{"op":"members.remove","id":"n%d"}`, f+1)); code != 0 {
		t.Fatalf("members.remove: %d %v", code, st)
	}
	c.Kill(f)
	// Add a brand-new server with an empty data directory.
	cfg := testcluster.Config(t, "n4", filepath.Join(t.TempDir(), "n4"))
	cfg.Join = true
	s4, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s4.Close()
	r := testcluster.Hello(t, c.Addr(l), "")
	g := expect(t, r.Final(r.Acquire("k", testcluster.Owner(1), 0, 60)), wire.TypeGranted)
	if code, st = admin(t, c.Addr(l), fmt.Sprintf(`{"op":"members.add","id":"n4","raft_addr":%q}`, s4.RaftAddr())); code != 0 {
		t.Fatalf("members.add: %d %v", code, st)
	}
	testcluster.WaitFor(t, 20*time.Second, "the added server catching up", func() bool {
		return s4.Status().LastToken >= g.Token
	})
	_, st = admin(t, c.Addr(l), `{"op":"status"}`)
	ids := map[string]bool{}
	for _, m := range st["members"].([]any) {
		ids[m.(map[string]any)["id"].(string)] = true
	}
	if len(ids) != 3 || !ids["n4"] || ids[fmt.Sprintf("n%d", f+1)] {
		t.Fatalf("members after remove+add: %v", ids)
	}
	// Leadership transfer to the new server works, and it then serves.
	if code, st = admin(t, c.Addr(l), `{"op":"leader.transfer","id":"n4"}`); code != 0 {
		t.Fatalf("leader.transfer: %d %v", code, st)
	}
	testcluster.WaitFor(t, 20*time.Second, "n4 serving after the transfer", s4.IsServing)
	n := testcluster.Hello(t, s4.ClientAddr().String(), "")
	expect(t, n.Final(n.Release("k", g.Token)), wire.TypeReleased)
}

func TestSnapshotSaveAndRestore(t *testing.T) {
	c := testcluster.Start(t, 1)
	r := testcluster.Hello(t, c.Addr(0), "")
	held := map[string]uint64{}
	var last uint64
	for i := 0; i < 20; i++ {
		key := fmt.Sprintf("k%d", i)
		g := expect(t, r.Final(r.Acquire(key, testcluster.Owner(i), 0, 200)), wire.TypeGranted)
		held[key], last = g.Token, g.Token
	}
	// Save a backup through an admin session: chunks (V 3), then metadata (V 0).
	a := testcluster.DialRaw(t, c.Addr(0))
	a.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Flags: wire.HelloAdmin})
	expect(t, a.Recv(), wire.TypeReady)
	a.Send(&wire.Frame{Type: wire.TypeAdmin, ID: 1, Text: []byte(`{"op":"snapshot.save"}`)})
	var backup []byte
	for {
		f := expect(t, a.Final(1), wire.TypeAdminReply)
		if f.Code == 3 {
			backup = append(backup, f.Text...)
			continue
		}
		if f.Code != 0 {
			t.Fatalf("snapshot.save failed: %s", f.Text)
		}
		var meta struct{ Size int }
		json.Unmarshal(f.Text, &meta)
		if meta.Size != len(backup) || len(backup) == 0 {
			t.Fatalf("snapshot size %d, received %d bytes", meta.Size, len(backup))
		}
		break
	}
	file := filepath.Join(t.TempDir(), "backup.snap")
	if err := os.WriteFile(file, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	// Restore into a fresh single node.
	cfg := testcluster.Config(t, "r1", filepath.Join(t.TempDir(), "r1"))
	cfg.RestoreFile = file
	// A start with a restore is all or nothing: when its last step fails
	// (the HTTP port is taken), what it opened is closed and the data
	// directory left empty, so the same command runs again.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	busy := cfg
	busy.HTTPAddr = taken.Addr().String()
	if _, err := server.New(busy); err == nil || !strings.Contains(err.Error(), "listen for HTTP") {
		t.Fatalf("restore with the HTTP port taken: %v", err)
	}
	taken.Close()
	s, err := server.New(cfg)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	defer s.Close()
	n := helloAny(t, []string{s.ClientAddr().String()}, 0)
	for key, tok := range held {
		if f := describe(t, n, key); f.Token != tok {
			t.Fatalf("restored %s token %d, want %d", key, f.Token, tok)
		}
	}
	// Tokens resume far above the backup's: the old cluster may have granted
	// more after the backup was taken, and those must never be granted again.
	const dayOfTokens = 24 * 60 * 60 * 1000 * node.RestoreTokenRate
	if g := expect(t, n.Final(n.Acquire("new", testcluster.Owner(99), 0, 30)), wire.TypeGranted); g.Token <= last+dayOfTokens {
		t.Fatalf("token after restore %d not above %d + a day of tokens", g.Token, last)
	}
	// Restoring over existing data is refused with a clear error.
	s.Close()
	cfg.ClientAddr, cfg.RaftAddr, cfg.HTTPAddr = testcluster.FreePort(t), testcluster.FreePort(t), testcluster.FreePort(t)
	if _, err := server.New(cfg); err == nil || !strings.Contains(err.Error(), "already holds state") {
		t.Fatalf("restore over existing data: %v", err)
	}
	// A file that is not a snapshot is refused before anything changes.
	os.WriteFile(file, []byte("not a snapshot"), 0o600)
	cfg2 := testcluster.Config(t, "r2", filepath.Join(t.TempDir(), "r2"))
	cfg2.RestoreFile = file
	if _, err := server.New(cfg2); err == nil || !strings.Contains(err.Error(), "not a valid Ticketing snapshot") {
		t.Fatalf("restore of garbage: %v", err)
	}
}
