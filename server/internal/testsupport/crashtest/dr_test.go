package crashtest

// Cluster identity and disaster recovery, with
// real ticketd processes and the real ticketctl, following the procedures
// of docs/deployment.md.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// ctl runs ticketctl and returns its exit code and output.
func ctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(ticketctlBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("ticketctl %q: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool, logs ...*proc) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, p := range logs {
				b.WriteString(p.logTail(25) + "\n")
			}
			t.Fatalf("%s: not within %v\n%s", what, d, b.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
	}
}

// waitExit waits for a process that must refuse to start.
func waitExit(t *testing.T, p *proc) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(startTimeout):
		t.Fatalf("%s still runs; it should have refused to start\n%s", p.id, p.logTail(20))
	}
}

// grantKey acquires key for owner through addrs and returns its token; it
// fails the test unless the key is granted.
func grantKey(t *testing.T, addrs []string, key string, owner byte) uint64 {
	t.Helper()
	c := newClient(addrs)
	defer c.close()
	deadline := time.Now().Add(startTimeout)
	for {
		if err := c.connect(); err == nil {
			g, o, err := c.do(&wire.Frame{Type: wire.TypeAcquire, Owner: wire.Owner{0xD0, owner}, Lease: lease, Key: []byte(key)})
			if o == answered {
				if g.Type != wire.TypeGranted {
					t.Fatalf("acquire %s: got %s", key, g.Type)
				}
				return g.Token
			}
			if time.Now().After(deadline) {
				t.Fatalf("acquire %s: %v %v", key, o, err)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("acquire %s: no serving leader: %v", key, err)
		}
		time.Sleep(20 * time.Millisecond) // retrying until a leader serves, with a deadline
	}
}

// holder describes key and returns its holder's token (0 when free).
func holder(t *testing.T, addrs []string, key string) uint64 {
	t.Helper()
	c := newClient(addrs)
	defer c.close()
	deadline := time.Now().Add(startTimeout)
	for {
		if err := c.connect(); err == nil {
			f, o, err := c.do(&wire.Frame{Type: wire.TypeDescribe, Key: []byte(key)})
			if o == answered {
				return f.Token
			}
			if time.Now().After(deadline) {
				t.Fatalf("describe %s: %v %v", key, o, err)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("describe %s: %v", key, err)
		}
		time.Sleep(20 * time.Millisecond) // retrying until a leader serves, with a deadline
	}
}

func statusOf(t *testing.T, p *proc) status {
	t.Helper()
	st, err := adminStatus(p.client)
	if err != nil {
		t.Fatalf("status of %s: %v\n%s", p.id, err, p.logTail(20))
	}
	return st
}

func peers(ps ...*proc) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.id+"="+p.raftAddr)
	}
	return strings.Join(out, ",")
}

// threeNodes starts n1..n3 as docs/deployment.md does: one config file
// (initial_cluster_state = "new" and the bootstrap list) for all.
func threeNodes(t *testing.T) (*cluster, string) {
	t.Helper()
	c := startCluster(t, 3)
	// Every server settles on one cluster ID.
	waitFor(t, startTimeout, "one cluster ID on all servers", func() bool {
		var ids []string
		for _, p := range c.procs {
			st, err := adminStatus(p.client)
			if err != nil || st.ClusterID == "" || st.ClusterID == "none" {
				return false
			}
			ids = append(ids, st.ClusterID)
		}
		return ids[0] == ids[1] && ids[1] == ids[2]
	}, c.procs...)
	return c, statusOf(t, c.procs[0]).ClusterID
}

// TestDRWipedMemberNeverReissuesTokens: grant
// tokens on two of three servers, stop them, wipe one, restart it with the
// third. The wiped server (restarted as the docs' config has it, or to join)
// must not form a majority with the stale third: no leader, no token again.
// Once the server that holds the grants is back, tokens continue above them;
// the documented disk-replacement procedure brings the wiped server back.
func TestDRWipedMemberNeverReissuesTokens(t *testing.T) {
	for _, mode := range []string{"new", "existing"} {
		t.Run("restarted with initial-cluster-state "+mode, func(t *testing.T) {
			c, id := threeNodes(t)
			n1, n2, n3 := c.procs[0], c.procs[1], c.procs[2]
			n3.stop()
			var last uint64
			for i := 0; i < 5; i++ {
				last = grantKey(t, []string{n1.client, n2.client}, fmt.Sprintf("wiped/%d", i), byte(i))
			}
			n1.stop()
			n2.stop()
			if err := os.RemoveAll(n1.dataDir); err != nil {
				t.Fatal(err)
			}
			if mode == "existing" {
				n1.extra = append(n1.extra, "--initial-cluster-state", "existing")
			}
			n1.start()
			n3.start()
			// Until a server serves, or n3 has stood for election three
			// times (pre-vote keeps its term) and lost each time.
			elections := func() int { return strings.Count(n3.log(), "election") }
			waitFor(t, startTimeout, "a leader, or three failed elections", func() bool {
				return serves(n1.client) || serves(n3.client) || elections() >= 3
			}, n1, n3)
			for _, p := range []*proc{n1, n3} {
				if serves(p.client) {
					tok := grantKey(t, []string{p.client}, "wiped/0", 99)
					t.Fatalf("%s serves as leader with a wiped member and a stale one: committed grants are lost (wiped/0 granted again with token %d; %d tokens were granted before)\n%s", p.id, tok, last, p.logTail(20))
				}
			}
			// n3 holds the cluster's ID and knows n1 took part: it refuses
			// n1, saying what to do.
			for _, want := range []string{"has lost data the cluster counted on", "ticketctl members remove n1"} {
				if !strings.Contains(n3.log(), want) {
					t.Errorf("n3's log does not say %q:\n%s", want, n3.logTail(10))
				}
			}
			// The server with the grants returns: tokens continue above them.
			n2.start()
			if tok := grantKey(t, []string{n2.client, n3.client}, "wiped/after", 9); tok <= last {
				t.Fatalf("token %d granted again (last granted before: %d)", tok, last)
			}
			for i := 0; i < 5; i++ {
				if tok := holder(t, []string{n2.client, n3.client}, fmt.Sprintf("wiped/%d", i)); tok == 0 {
					t.Errorf("wiped/%d lost its grant", i)
				}
			}
			// docs/deployment.md, "Replace a failed disk".
			all := n2.client + "," + n3.client
			if code, out, errs := ctl(t, "--addr", all, "members", "remove", "n1"); code != 0 {
				t.Fatalf("members remove: %d %s %s", code, out, errs)
			}
			n1.stop()
			os.RemoveAll(n1.dataDir)
			n1.extra = []string{n1.extra[0], n1.extra[1], "--join"} // the config file, no bootstrap
			n1.start()
			waitFor(t, startTimeout, "n1 waits to be added", func() bool { return strings.Contains(n1.log(), "waiting to be added") }, n1)
			if code, out, errs := ctl(t, "--addr", all, "members", "add", "n1", n1.raftAddr); code != 0 {
				t.Fatalf("members add: %d %s %s\n%s", code, out, errs, n2.logTail(10))
			}
			waitFor(t, startTimeout, "n1 catches up in the same cluster", func() bool {
				st, err := adminStatus(n1.client)
				return err == nil && st.ClusterID == id && st.LastToken > last
			}, n1, n2, n3)
		})
	}
}

// TestDRMemberStartedWithoutBootstrap: a voter of the
// bootstrap list started later with the config file but without the
// bootstrap list must not form a cluster of its own; it waits and is taken
// in by the real cluster.
func TestDRMemberStartedWithoutBootstrap(t *testing.T) {
	base := t.TempDir()
	cfgFile := filepath.Join(base, "ticketd.toml")
	if err := os.WriteFile(cfgFile, []byte(clusterConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	n1 := newProc(t, "n1", base, "--config", cfgFile)
	n2 := newProc(t, "n2", base, "--config", cfgFile)
	n3 := newProc(t, "n3", base, "--config", cfgFile) // no bootstrap list, no initial_cluster_state: ticketd's default
	n3.asIs = true
	list := peers(n1, n2, n3)
	n1.extra = append(n1.extra, "--bootstrap", list)
	n2.extra = append(n2.extra, "--bootstrap", list)
	n3.start() // first, alone: with the old code it elected itself
	waitFor(t, startTimeout, "n3 waits to be added", func() bool { return strings.Contains(n3.log(), "waiting to be added") }, n3)
	if serves(n3.client) {
		t.Fatalf("n3 serves on its own\n%s", n3.logTail(10))
	}
	n1.start()
	n2.start()
	first := grantKey(t, []string{n1.client, n2.client}, "x", 1)
	// n3 is taken in by the real cluster and follows it.
	waitFor(t, startTimeout, "n3 in the cluster", func() bool {
		st, err := adminStatus(n3.client)
		s1, err1 := adminStatus(n1.client)
		return err == nil && err1 == nil && st.ClusterID != "none" && st.ClusterID == s1.ClusterID && st.LastToken >= first
	}, n1, n2, n3)
	// Whoever leads, x stays held by its first owner.
	for _, p := range []*proc{n1, n2, n3} {
		if tok := holder(t, []string{p.client, n1.client, n2.client}, "x"); tok != first {
			t.Fatalf("x held by token %d, want %d", tok, first)
		}
	}
}

// backupOf saves a snapshot of the cluster at addrs with ticketctl.
func backupOf(t *testing.T, addrs, file string) {
	t.Helper()
	if code, out, errs := ctl(t, "--addr", addrs, "snapshot", "save", file); code != 0 {
		t.Fatalf("snapshot save: %d %s %s", code, out, errs)
	}
}

// TestDRRestoreRefusesOldMember: after a restore, an
// old member that kept its data is refused by members add (it holds another
// cluster's history), and tokens never go back.
func TestDRRestoreRefusesOldMember(t *testing.T) {
	base := t.TempDir()
	old := newProc(t, "n2", base)
	old.start()
	old.mustReady()
	for i := 0; i < 10; i++ {
		grantKey(t, []string{old.client}, fmt.Sprintf("old/%d", i), byte(i))
	}
	file := filepath.Join(base, "backup.snap")
	backupOf(t, old.client, file)
	old.stop()

	r := newProc(t, "r1", base, "--restore", file)
	r.start()
	r.mustReady()
	floor := statusOf(t, r).LastToken
	// The log line names the backup's own last token, not the raised floor.
	if !strings.Contains(r.log(), "backup_last_token=10 ") || !strings.Contains(r.log(), fmt.Sprintf("tokens_resume_above=%d ", floor)) {
		t.Errorf("restore log line:\n%s", r.logTail(5))
	}
	// As the docs say: stop it, start it again without --restore.
	r.stop()
	r.extra = []string{"--initial-cluster-state", "existing"}
	r.start()
	r.mustReady()

	// --join on a directory that holds state is refused, not ignored.
	old.extra = []string{"--join"}
	old.start()
	waitExit(t, old)
	if old.exitCode() == 0 || !strings.Contains(old.log(), "already holds Raft state") {
		t.Fatalf("--join on the old member's data: exit %d\n%s", old.exitCode(), old.logTail(5))
	}
	old.extra = nil
	old.start() // the old member, data intact, restarted by its service
	old.mustReady()
	code, out, errs := ctl(t, "--addr", r.client, "members", "add", "n2", old.raftAddr)
	if code == 0 {
		t.Fatalf("members add of a server holding the old cluster's data succeeded: %s", out)
	}
	if !strings.Contains(errs, "holds the data of cluster") {
		t.Errorf("refusal does not say why: %s", errs)
	}
	if tok := grantKey(t, []string{r.client}, "after-restore", 1); tok <= floor {
		t.Fatalf("token %d after the restore, want above %d", tok, floor)
	}
	if st := statusOf(t, r); st.Role != "leader" || len(st.ClusterID) != 32 {
		t.Fatalf("restored server: %+v", st)
	}
}

// TestDRFailedRestoreLeavesNothing: a restore from a
// missing or damaged file changes nothing; the next start does not serve
// an empty cluster.
func TestDRFailedRestoreLeavesNothing(t *testing.T) {
	base := t.TempDir()
	src := newProc(t, "s1", base)
	src.start()
	src.mustReady()
	grantKey(t, []string{src.client}, "k", 1)
	good := filepath.Join(base, "good.snap")
	backupOf(t, src.client, good)
	src.stop()
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(base, "truncated.snap")
	os.WriteFile(truncated, data[:len(data)-3], 0o600)
	newer := filepath.Join(base, "newer.snap")
	b := append([]byte(nil), data[:len(data)-4]...)
	b[4] = 99 // a format version from the future, with a valid checksum
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	os.WriteFile(newer, b, 0o600)

	for _, tc := range []struct{ name, file, msg string }{
		{"missing", filepath.Join(base, "typo.snap"), "no such file"},
		{"truncated", truncated, "not a valid Ticketing snapshot"},
		{"newer version", newer, "newer than this ticketd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newProc(t, "r1", filepath.Join(base, tc.name), "--restore", tc.file)
			r.start()
			waitExit(t, r)
			if r.exitCode() == 0 || !strings.Contains(r.log(), tc.msg) {
				t.Fatalf("exit %d, want 1 and %q\n%s", r.exitCode(), tc.msg, r.logTail(10))
			}
			if ents, _ := os.ReadDir(filepath.Join(r.dataDir, "raft")); len(ents) > 0 {
				t.Fatalf("the failed restore left %d entries in the data directory (%s)", len(ents), ents[0].Name())
			}
			// The next start, without --restore, as a member of a cluster: it waits.
			r.extra = []string{"--initial-cluster-state", "existing"}
			r.start()
			waitFor(t, startTimeout, "waits to be added", func() bool { return strings.Contains(r.log(), "waiting to be added") }, r)
			if serves(r.client) {
				t.Fatal("serves an empty cluster after a failed restore")
			}
			r.stop()
		})
	}
}

// TestDRMembersAddWrongAddress: a typo in members add on
// a one-node cluster is refused and the cluster keeps serving.
func TestDRMembersAddWrongAddress(t *testing.T) {
	p := newProc(t, "n1", t.TempDir())
	p.start()
	p.mustReady()
	nowhere := freePort(t)
	code, _, errs := ctl(t, "--addr", p.client, "members", "add", "n2", nowhere)
	if code == 0 || !strings.Contains(errs, "no ticketd answers at "+nowhere) {
		t.Fatalf("members add of an address where nothing listens: exit %d %s", code, errs)
	}
	// A server that is not the one named is refused too.
	other := newProc(t, "n9", t.TempDir(), "--join")
	other.start()
	waitFor(t, startTimeout, "n9 waits", func() bool { return strings.Contains(other.log(), "waiting to be added") }, other)
	code, _, errs = ctl(t, "--addr", p.client, "members", "add", "n2", other.raftAddr)
	if code == 0 || !strings.Contains(errs, `is "n9", not "n2"`) {
		t.Fatalf("members add of the wrong server: exit %d %s", code, errs)
	}
	// A second server with the leader's node_id: refused as a member that exists.
	dup := newProc(t, "n1", t.TempDir(), "--join")
	dup.start()
	waitFor(t, startTimeout, "the duplicate waits", func() bool { return strings.Contains(dup.log(), "waiting to be added") }, dup)
	code, _, errs = ctl(t, "--addr", p.client, "members", "add", "n1", dup.raftAddr)
	if code == 0 || !strings.Contains(errs, "n1 is already a member") {
		t.Fatalf("members add of a duplicate node_id: exit %d %s", code, errs)
	}
	grantKey(t, []string{p.client}, "still-serving", 1)
	if st := statusOf(t, p); len(st.ClusterID) != 32 || st.Role != "leader" {
		t.Fatalf("after the refused adds: %+v", st)
	}
}

// TestDRMajorityLoss: two of three servers are gone for
// good. The survivor's data directory is exported (ticketd --export-backup)
// and restored as a new cluster: every grant the survivor knew is held,
// and tokens continue above every token granted before.
func TestDRMajorityLoss(t *testing.T) {
	c, _ := threeNodes(t)
	n1 := c.procs[0]
	var last uint64
	for i := 0; i < 30; i++ {
		last = grantKey(t, c.addrs(), fmt.Sprintf("ml/%d", i), byte(i))
	}
	// The grants are on a majority; make sure n1 has them all applied.
	waitFor(t, startTimeout, "n1 applied the grants", func() bool {
		st, err := adminStatus(n1.client)
		return err == nil && st.LastToken == last
	}, n1)
	for _, p := range c.procs[1:] {
		p.kill()
		os.RemoveAll(p.dataDir)
	}
	// Alone, n1 steps down once its leader lease runs out.
	waitFor(t, startTimeout, "n1 steps down", func() bool {
		st, err := adminStatus(n1.client)
		return err == nil && st.Role != "leader"
	}, n1)
	code, _, errs := ctl(t, "--addr", n1.client, "--timeout", "3s", "snapshot", "save", filepath.Join(t.TempDir(), "x.snap"))
	if code == 0 {
		t.Fatal("snapshot save without a leader succeeded")
	}
	t.Logf("snapshot save without a majority: %s", strings.TrimSpace(errs))
	n1.stop()
	file := filepath.Join(t.TempDir(), "survivor.snap")
	cmd := exec.Command(ticketdBin, "--config", filepath.Join(filepath.Dir(filepath.Dir(n1.dataDir)), "ticketd.toml"), "--data-dir", n1.dataDir, "--export-backup", file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	} else if !strings.Contains(string(out), fmt.Sprintf("last token %d", last)) {
		t.Errorf("export output: %s", out)
	}
	r := newProc(t, "r1", t.TempDir(), "--restore", file)
	r.start()
	r.mustReady()
	for i := 0; i < 30; i++ {
		if tok := holder(t, []string{r.client}, fmt.Sprintf("ml/%d", i)); tok == 0 || tok > last {
			t.Errorf("ml/%d: token %d after recovery", i, tok)
		}
	}
	if tok := grantKey(t, []string{r.client}, "ml/new", 1); tok <= last {
		t.Fatalf("token %d granted after the recovery, want above %d", tok, last)
	}
}

// TestDRPermissionIsNotDamage: a data directory this
// process may not write is reported as an access problem, not as damage
// with advice to delete it.
func TestDRPermissionIsNotDamage(t *testing.T) {
	base := t.TempDir()
	p := newProc(t, "n1", base)
	p.start()
	p.mustReady()
	grantKey(t, []string{p.client}, "k", 1)
	p.stop()
	if os.Geteuid() == 0 {
		// root may write anywhere: run ticketd as nobody instead.
		for _, d := range []string{filepath.Dir(ticketdBin), filepath.Dir(base), base, filepath.Dir(p.dataDir), p.logDir} {
			os.Chmod(d, 0o755)
		}
		// Readable directories, files owned by root: as after a restore run
		// as root, or a copy made with the wrong owner.
		os.Chmod(p.dataDir, 0o755)
		os.Chmod(filepath.Join(p.dataDir, "raft"), 0o755)
		p.asUser = &syscall.Credential{Uid: 65534, Gid: 65534}
	} else {
		os.Chmod(filepath.Join(p.dataDir, "raft"), 0o500)
		defer os.Chmod(filepath.Join(p.dataDir, "raft"), 0o750)
	}
	p.start()
	waitExit(t, p)
	log := p.log()
	if p.exitCode() == 0 || !strings.Contains(log, "not accessible") || strings.Contains(log, "data directory damaged") || strings.Contains(log, "remove its data directory") {
		t.Fatalf("exit %d; want an access error without damage advice:\n%s", p.exitCode(), p.logTail(10))
	}
}

// TestDRCorruptNewestSnapshot: a damaged newest snapshot
// is refused at start with what to do, never a panic.
func TestDRCorruptNewestSnapshot(t *testing.T) {
	for _, part := range []string{"state.bin", "meta.json"} {
		t.Run(part, func(t *testing.T) {
			base := t.TempDir()
			cfgFile := filepath.Join(base, "ticketd.toml")
			os.WriteFile(cfgFile, []byte(clusterConfig), 0o600)
			p := newProc(t, "n1", base, "--config", cfgFile)
			p.start()
			p.mustReady()
			snapDir := filepath.Join(p.dataDir, "raft", "snapshots")
			// Operations until two snapshots exist and the log was compacted past the older one.
			for i := 0; ; i++ {
				grantKey(t, []string{p.client}, fmt.Sprintf("snap/%d", i), byte(i))
				if ents, _ := os.ReadDir(snapDir); len(ents) >= 2 && i > 300 {
					break
				}
				if i > 5000 {
					t.Fatal("no two snapshots after 5000 grants")
				}
			}
			p.stop()
			// Names are TERM-INDEX-MILLIS: the newest has the highest index.
			ents, _ := os.ReadDir(snapDir)
			var name string
			var best uint64
			for _, e := range ents {
				var term, index, ms uint64
				if n, _ := fmt.Sscanf(e.Name(), "%d-%d-%d", &term, &index, &ms); n == 3 && index >= best {
					name, best = e.Name(), index
				}
			}
			newest := filepath.Join(snapDir, name, part)
			b, err := os.ReadFile(newest)
			if err != nil {
				t.Fatal(err)
			}
			if part == "meta.json" {
				b = b[:len(b)/2] // unreadable metadata
			} else {
				b[len(b)/2] ^= 0xff
			}
			os.WriteFile(newest, b, 0o600)
			p.start()
			waitExit(t, p)
			log := p.log()
			if p.exitCode() == 0 || strings.Contains(log, "panic") || !strings.Contains(log, "snapshot") || !strings.Contains(log, "members remove") {
				t.Fatalf("exit %d; want a clean refusal naming the snapshot and the fix:\n%s", p.exitCode(), crashExcerpt(log))
			}
		})
	}
}

// TestLeaderTransferReportsOnlyARealMove: with the other
// voters paused, the leader steps down during a transfer without anyone
// taking over; ticketctl must not report that as a transfer.
func TestLeaderTransferReportsOnlyARealMove(t *testing.T) {
	c := startCluster(t, 3)
	l := c.procs[c.leader()]
	var others []*proc
	for _, p := range c.procs {
		if p != l {
			others = append(others, p)
		}
	}
	for _, p := range others {
		p.cmd.Process.Signal(syscall.SIGSTOP)
	}
	defer func() {
		for _, p := range others {
			p.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	code, out, errs := ctl(t, "--addr", l.client, "leader", "transfer", others[0].id)
	if code == 0 {
		t.Fatalf("leader transfer to a paused voter reported success: %s", out)
	}
	t.Logf("refused as it should be: %s", strings.TrimSpace(errs))
}
