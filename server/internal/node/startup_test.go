package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// singleConfig is a one-node cluster in dir with short timeouts.
func singleConfig(dir string, l *syncBuf) Config {
	return Config{ID: "s1", RaftAddr: "127.0.0.1:0", Dir: dir, InitialState: "new",
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(l, nil))}
}

// acquireKeys commits one batch acquiring keys prefix/0..n-1.
func acquireKeys(t *testing.T, n *Node, prefix string, count int) {
	t.Helper()
	b := fsm.Batch{Time: time.Now().UnixMilli()}
	for i := range count {
		b.Ops = append(b.Ops, fsm.Op{Kind: fsm.OpAcquire, Key: fmt.Sprintf("%s/%d", prefix, i), Owner: fsm.Owner{1}, LeaseMs: 600_000})
	}
	if err := n.Raft().Apply(fsm.AppendBatch(nil, &b), 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
}

// snapshotThenLog leaves dir with a snapshot of 100 held tickets followed
// in the log by a batch of 50 more, and returns the snapshot's directory.
func snapshotThenLog(t *testing.T, dir string) string {
	t.Helper()
	var l syncBuf
	n, err := Open(singleConfig(dir, &l))
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "cluster ID", func() bool { return n.Cluster() != (fsm.ClusterID{}) })
	acquireKeys(t, n, "snap", 100)
	if err := n.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	acquireKeys(t, n, "log", 50)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	list, err := n.snaps.List()
	if err != nil || len(list) == 0 {
		t.Fatalf("no snapshot: %v", err)
	}
	return filepath.Join(dir, "snapshots", list[0].ID)
}

// TestRestartReadsTheSnapshotOnce: a restart reads the newest snapshot's
// state once (the check's read is the state Raft starts from) and then
// has everything the snapshot and the log after it hold.
func TestRestartReadsTheSnapshotOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s1")
	snapshotThenLog(t, dir)
	var l syncBuf
	before := snapshotStateReads.Load()
	n, err := Open(singleConfig(dir, &l))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if reads := snapshotStateReads.Load() - before; reads != 1 {
		t.Fatalf("opening read the snapshot's state %d times, want once", reads)
	}
	waitUntil(t, "the log replayed after the snapshot", func() bool { return n.Held() == 150 })
	if err := n.Raft().Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if reads := snapshotStateReads.Load() - before; reads != 1 {
		t.Fatalf("the snapshot's state was read %d times by the time the log was applied, want once", reads)
	}
	var held []string
	n.Read(func(s *fsm.State) {
		for _, k := range []string{"snap/0", "snap/99", "log/0", "log/49"} {
			if _, ok := s.Get(k); ok {
				held = append(held, k)
			}
		}
	})
	if len(held) != 4 {
		t.Fatalf("held after restart: %v", held)
	}
}

// TestDamagedSnapshotIsRefused: the one read of the newest snapshot still
// checks both checksums, the state's own and the CRC-64 Raft records in
// meta.json, and refuses a mismatch with the operator's way out.
func TestDamagedSnapshotIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, snapDir string)
		want   string
	}{
		{"flipped byte in state.bin", func(t *testing.T, snapDir string) {
			p := filepath.Join(snapDir, "state.bin")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0xff
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "CRC mismatch"},
		{"meta.json records another CRC", func(t *testing.T, snapDir string) {
			// The state itself is intact (it decodes, its own checksum
			// matches): only Raft's checksum says the file is not the one
			// that was written.
			p := filepath.Join(snapDir, "meta.json")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var meta map[string]any
			if err := json.Unmarshal(b, &meta); err != nil {
				t.Fatal(err)
			}
			meta["CRC"] = []byte{1, 2, 3, 4, 5, 6, 7, 8}
			if b, err = json.Marshal(meta); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "CRC mismatch"},
		{"truncated state.bin", func(t *testing.T, snapDir string) {
			p := filepath.Join(snapDir, "state.bin")
			info, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, info.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, "CRC mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "s1")
			tc.damage(t, snapshotThenLog(t, dir))
			var l syncBuf
			n, err := Open(singleConfig(dir, &l))
			if err == nil {
				n.Close()
				t.Fatal("a damaged newest snapshot was accepted")
			}
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "snapshot") || !strings.Contains(err.Error(), "ticketctl members remove") {
				t.Fatalf("want ErrDamaged naming the snapshot, %q and the fix; got %v", tc.want, err)
			}
		})
	}
}

// TestIdentityReplayMatchesFullReplay: following only the identity
// operations through the log gives the cluster ID and participants (with
// their incarnations) that applying everything gives, from any snapshot.
func TestIdentityReplayMatchesFullReplay(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	nodes := []string{"a", "b", "c", "d"}
	randomBatch := func(now int64) fsm.Batch {
		b := fsm.Batch{Time: now}
		for range 1 + rng.IntN(6) {
			switch rng.IntN(6) {
			case 0:
				b.Ops = append(b.Ops, fsm.Op{Kind: fsm.OpSetCluster, Cluster: fsm.ClusterID{byte(1 + rng.IntN(3))}})
			case 1:
				b.Ops = append(b.Ops, fsm.Op{Kind: fsm.OpAdmit, NodeID: nodes[rng.IntN(len(nodes))], Incarnation: rng.Uint64N(3)})
			case 2:
				b.Ops = append(b.Ops, fsm.Op{Kind: fsm.OpForget, NodeID: nodes[rng.IntN(len(nodes))]})
			case 3:
				b.Ops = append(b.Ops, fsm.Op{Kind: fsm.OpTakeover, NodeID: nodes[rng.IntN(len(nodes))], Addr: "x:1"})
			default:
				b.Ops = append(b.Ops, fsm.Op{Kind: fsm.OpAcquire, Key: fmt.Sprintf("k%d", rng.IntN(20)), Owner: fsm.Owner{1}, LeaseMs: 1000})
			}
		}
		return b
	}
	for round := range 200 {
		full := fsm.New()
		var log []fsm.Batch
		for i := range 1 + rng.IntN(30) {
			log = append(log, randomBatch(int64(i)))
		}
		cut := rng.IntN(len(log) + 1) // entries up to cut are in the snapshot
		for _, b := range log[:cut] {
			full.Apply(b)
		}
		var snapshot *fsm.State
		if cut > 0 {
			snapshot = full.Clone()
		}
		r := newIdentityReplay(snapshot)
		for _, b := range log[cut:] {
			full.Apply(b)
			r.apply(b)
		}
		if r.state.Cluster() != full.Cluster() || !slices.Equal(r.state.Participants(), full.Participants()) {
			t.Fatalf("round %d: identity replay %s %v, full replay %s %v", round,
				FormatClusterID(r.state.Cluster()), r.state.Participants(), FormatClusterID(full.Cluster()), full.Participants())
		}
		for _, id := range nodes {
			if r.state.Incarnation(id) != full.Incarnation(id) {
				t.Fatalf("round %d: incarnation of %s: %d, full replay %d", round, id, r.state.Incarnation(id), full.Incarnation(id))
			}
		}
	}
}

// TestRestartLearnsParticipantsFromTheLog: participants admitted after the
// newest snapshot are known from the log before any leader applies it.
func TestRestartLearnsParticipantsFromTheLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s1")
	var l syncBuf
	n, err := Open(singleConfig(dir, &l))
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "cluster ID", func() bool { return n.Cluster() != (fsm.ClusterID{}) })
	if err := n.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	b := fsm.Batch{Time: time.Now().UnixMilli(), Ops: []fsm.Op{{Kind: fsm.OpAdmit, NodeID: "later", Incarnation: 42}}}
	if err := n.Raft().Apply(fsm.AppendBatch(nil, &b), 5*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	n.Close()

	cfg := singleConfig(dir, &l)
	cfg.ElectionTimeout, cfg.HeartbeatTimeout = time.Hour, time.Hour // no leader: nothing is applied
	n, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.Raft().State() == raft.Leader {
		t.Fatal("a leader was elected; the test needs none")
	}
	if inc := n.id.incarnationOf("later"); inc != 42 {
		t.Fatalf("participant admitted after the snapshot: incarnation %d, want 42", inc)
	}
}

// TestRestartKnowsAReaddedIncarnationFromTheLog: a participant admitted
// before the newest snapshot, then removed and added back with another
// directory after it, is known by its new incarnation before any leader
// applies the log: its old directory, settled, is refused meanwhile.
func TestRestartKnowsAReaddedIncarnationFromTheLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s1")
	var l syncBuf
	n, err := Open(singleConfig(dir, &l))
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "cluster ID", func() bool { return n.Cluster() != (fsm.ClusterID{}) })
	apply := func(ops ...fsm.Op) {
		t.Helper()
		b := fsm.Batch{Time: time.Now().UnixMilli(), Ops: ops}
		if err := n.Raft().Apply(fsm.AppendBatch(nil, &b), 5*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
	apply(fsm.Op{Kind: fsm.OpAdmit, NodeID: "p1", Incarnation: 42})
	if err := n.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	apply(fsm.Op{Kind: fsm.OpForget, NodeID: "p1"})
	apply(fsm.Op{Kind: fsm.OpAdmit, NodeID: "p1", Incarnation: 43})
	cluster := n.Cluster()
	n.Close()

	cfg := singleConfig(dir, &l)
	cfg.ElectionTimeout, cfg.HeartbeatTimeout = time.Hour, time.Hour // no leader: nothing is applied
	n, err = Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.Raft().State() == raft.Leader {
		t.Fatal("a leader was elected; the test needs none")
	}
	var applied uint64
	n.Read(func(s *fsm.State) { applied = s.Incarnation("p1") })
	if applied != 42 {
		t.Fatalf("the snapshot's state has p1 with incarnation %d; the test needs 42", applied)
	}
	if inc := n.id.incarnationOf("p1"); inc != 43 {
		t.Fatalf("participant added back after the snapshot: incarnation %d, want 43", inc)
	}
	if reason := n.id.check(peerInfo{ID: "p1", State: stateSettled, Cluster: cluster, Incarnation: 42}, ""); !strings.Contains(reason, "removed and added back") {
		t.Fatalf("p1's old directory: refusal %q", reason)
	}
	// Stating its own admission (before the one of 43) changes nothing.
	rec := n.id.recordOf("p1")
	if rec.Index <= 1 {
		t.Fatalf("p1's record read from the log: %+v, want its entry's index", rec)
	}
	if reason := n.id.check(peerInfo{ID: "p1", State: stateSettled, Cluster: cluster, Incarnation: 42, Admitted: rec.Index - 1}, ""); !strings.Contains(reason, "removed and added back") {
		t.Fatalf("p1's old directory stating its admission: refusal %q", reason)
	}
}

// TestSnapshotsKeepUpWithAGrowingState: while every operation adds a
// ticket, snapshots are still taken (each after as many operations as the
// previous one held), so a restart replays at most about half the tickets
// from the log instead of all but the first few.
func TestSnapshotsKeepUpWithAGrowingState(t *testing.T) {
	var l syncBuf
	cfg := singleConfig(filepath.Join(t.TempDir(), "s1"), &l)
	cfg.SnapshotThreshold = 10
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	waitUntil(t, "cluster ID", func() bool { return n.Cluster() != (fsm.ClusterID{}) })
	var at80 uint64 // the index of the entry that made 80 tickets held
	for i := range 20 {
		acquireKeys(t, n, fmt.Sprintf("fill%d", i), 10)
		if n.Held() == 80 {
			at80 = n.Raft().AppliedIndex()
		}
	}
	if at80 == 0 {
		t.Fatalf("held %d after the fill", n.Held())
	}
	waitUntil(t, "a snapshot taken after 80 tickets were held", func() bool {
		list, err := n.snaps.List()
		return err == nil && len(list) > 0 && list[0].Index >= at80
	})
}

// TestRestartStatesItsOwnAdmission: a server takes a snapshot once it has
// applied its own admission, so after a restart, before Raft applies its
// log again (no leader here), it still states that admission in the
// handshake: a peer that has not read a later re-admission of this id
// needs it to tell this directory from the one before.
func TestRestartStatesItsOwnAdmission(t *testing.T) {
	var l syncBuf
	dir := filepath.Join(t.TempDir(), "s1")
	n, err := Open(singleConfig(dir, &l))
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "cluster ID", func() bool { return n.Cluster() != (fsm.ClusterID{}) })
	want := n.id.self().Admitted
	if want == 0 {
		t.Fatal("the founder states no admission of its own")
	}
	waitUntil(t, "a snapshot after its own admission", func() bool {
		list, err := n.snaps.List()
		return err == nil && len(list) > 0 && list[0].Index >= want
	})
	n.Close()

	cfg := singleConfig(dir, &l)
	cfg.ElectionTimeout, cfg.HeartbeatTimeout = time.Hour, time.Hour // no leader: nothing is applied
	if n, err = Open(cfg); err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if got := n.id.self().Admitted; got != want {
		t.Fatalf("after a restart it states admission index %d, want %d", got, want)
	}
}
