package crashtest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// corruptState is what a server held when it was stopped.
type corruptState struct {
	held     map[string]wire.Frame // key -> its G (token) and owner
	released []string
	last     uint64
}

// A corruption case damages a copy of a stopped server's Raft log file
// (file); size is the undamaged file's size.
type corruptCase struct {
	name    string
	corrupt func(t *testing.T, file string, size int64)
}

// A logFile is the file of a stopped server's data directory that the
// cases damage, and the ticketd that wrote the directory.
type logFile struct {
	named string                                    // what a refusal must name
	path  func(t *testing.T, dataDir string) string // the file to damage
	bin   func(t *testing.T) string                 // the ticketd that writes the directory; nil: this one
}

// raftDB is raft/raft.db written by the last ticketd before the log store:
// this ticketd migrates it at its first start, or refuses it.
var raftDB = logFile{
	named: "raft.db",
	path:  func(t *testing.T, dataDir string) string { return filepath.Join(dataDir, "raft", "raft.db") },
	bin:   lastBoltTicketd,
}

// walTail is the last segment of this ticketd's log store (raft/wal).
var walTail = logFile{
	named: filepath.Join("raft", "wal"),
	path: func(t *testing.T, dataDir string) string {
		names, _ := filepath.Glob(filepath.Join(dataDir, "raft", "wal", "*.wal"))
		if len(names) == 0 {
			t.Fatalf("no segment file in %s", filepath.Join(dataDir, "raft", "wal"))
		}
		sort.Strings(names)
		return names[len(names)-1]
	},
}

// runCorruptCases stops a server with a known state and, for each case,
// starts it on a copy of its data directory damaged by the case. It must
// refuse to start with a clear error naming the data file (exit code != 0,
// no crash dump), or serve exactly the state it had: never a wrong state.
func runCorruptCases(t *testing.T, lf logFile, cases []corruptCase) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts processes")
	}
	base := t.TempDir()
	// Default snapshot settings: every entry is still in the log.
	p := newProc(t, "n1", base)
	if lf.bin != nil {
		p.bin = lf.bin(t)
	}
	p.start()
	p.mustReady()
	st := fillState(t, p.client, 40)
	p.stop()
	if code := p.exitCode(); code != 0 {
		t.Fatalf("clean shutdown exited %d\n%s", code, p.logTail(20))
	}
	file := lf.path(t, p.dataDir)
	info, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(p.dataDir, file)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(base, fmt.Sprintf("case%d", i))
			copyDir(t, p.dataDir, filepath.Join(dir, "n1", "data"))
			// The copy stands for the server's own directory: said so, it
			// is checked for damage rather than refused as a copy.
			q := newProc(t, "n1", dir, "--data-dir-moved")
			q.client, q.raftAddr, q.httpAddr = p.client, p.raftAddr, p.httpAddr
			tc.corrupt(t, filepath.Join(q.dataDir, rel), info.Size())
			q.start()
			err := q.waitReady(startTimeout)
			switch {
			case errors.Is(err, errExited):
				checkRefusal(t, q, lf.named)
			case err != nil:
				t.Errorf("neither serves nor exits: %v\n%s", err, q.logTail(20))
			default:
				checkSameState(t, q, st)
			}
			q.stop()
		})
	}
}

// TestCorruptRaftLog: a damaged raft.db (the log of the versions before the
// log store, migrated at the first start of this one) is refused with a
// clear error or recovered exactly; never served silently.
func TestCorruptRaftLog(t *testing.T) {
	runCorruptCases(t, raftDB, []corruptCase{
		{"truncated to one page", truncateTo(func(int64) int64 { return 4096 })},
		{"last page cut off", truncateTo(func(size int64) int64 { return size - 4096 })},
		// Once served an empty state and granted token 1 again: refused (MEMBER marker).
		{"truncated to zero bytes", truncateTo(func(int64) int64 { return 0 })},
		// Once SIGBUS in bbolt's freelist read: refused (file shorter than its pages).
		{"truncated to half", truncateTo(func(size int64) int64 { return size / 2 })},
		// Once a bbolt assertion panic.
		{"256 random bytes in the middle", func(t *testing.T, file string, size int64) {
			overwrite(t, file, size/2, noise(256))
		}},
		// Once a panic in raft.NewRaft: refused (every entry is read before Raft starts).
		{"64 random bytes over a log entry", func(t *testing.T, file string, size int64) {
			offs := find(t, file, "corrupt/key-20")
			overwrite(t, file, offs[len(offs)-1]-32, noise(64))
		}},
		// Once decoded to a grant of "corrupt/Key-04" and served silently:
		// refused (every entry carries a CRC-32C).
		{"one byte of a held key changed in the log", func(t *testing.T, file string, size int64) {
			// Every copy of the key in the file, so that the live one is hit.
			for _, off := range find(t, file, "corrupt/key-04") {
				overwrite(t, file, off+int64(len("corrupt/")), []byte("K"))
			}
		}},
	})
}

// TestCorruptLogStore: a damaged log store (raft/wal: the last segment, its
// metadata) is refused with a clear error or recovered exactly; never
// served silently. Truncations are not torn writes: the store's high-water
// mark says how far the log was synced.
func TestCorruptLogStore(t *testing.T) {
	dataLen := func(t *testing.T, file string) int64 {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return int64(len(bytes.TrimRight(b, "\x00")))
	}
	meta := func(file string) string { return filepath.Join(filepath.Dir(file), "wal-meta.db") }
	runCorruptCases(t, walTail, []corruptCase{
		{"truncated to zero bytes", truncateTo(func(int64) int64 { return 0 })},
		{"truncated to one page", truncateTo(func(int64) int64 { return 4096 })},
		{"truncated to half its entries", func(t *testing.T, file string, size int64) {
			if err := os.Truncate(file, dataLen(t, file)/2); err != nil {
				t.Fatal(err)
			}
		}},
		{"last 100 bytes of entries cut off", func(t *testing.T, file string, size int64) {
			if err := os.Truncate(file, dataLen(t, file)-100); err != nil {
				t.Fatal(err)
			}
		}},
		{"256 random bytes in the middle of the entries", func(t *testing.T, file string, size int64) {
			overwrite(t, file, dataLen(t, file)/2, noise(256))
		}},
		{"64 random bytes over a log entry", func(t *testing.T, file string, size int64) {
			offs := find(t, file, "corrupt/key-20")
			overwrite(t, file, offs[len(offs)-1]-32, noise(64))
		}},
		{"one byte of a held key changed in the log", func(t *testing.T, file string, size int64) {
			for _, off := range find(t, file, "corrupt/key-04") {
				overwrite(t, file, off+int64(len("corrupt/")), []byte("K"))
			}
		}},
		{"segment file removed", func(t *testing.T, file string, size int64) {
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
		}},
		{"metadata truncated to one page", func(t *testing.T, file string, size int64) {
			if err := os.Truncate(meta(file), 4096); err != nil {
				t.Fatal(err)
			}
		}},
		{"metadata removed", func(t *testing.T, file string, size int64) {
			if err := os.Remove(meta(file)); err != nil {
				t.Fatal(err)
			}
		}},
	})
}

func truncateTo(n func(size int64) int64) func(t *testing.T, file string, size int64) {
	return func(t *testing.T, file string, size int64) {
		if err := os.Truncate(file, n(size)); err != nil {
			t.Fatal(err)
		}
	}
}

func overwrite(t *testing.T, file string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// noise returns n bytes, the same ones every run.
func noise(n int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// fillState acquires n keys (lease 250 s) and releases every other one.
func fillState(t *testing.T, addr string, n int) corruptState {
	t.Helper()
	c := newClient([]string{addr})
	defer c.close()
	if err := c.connect(); err != nil {
		t.Fatal(err)
	}
	st := corruptState{held: map[string]wire.Frame{}}
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("corrupt/key-%02d", i)
		owner := wire.Owner{0xC0, byte(i)}
		g, o, err := c.do(&wire.Frame{Type: wire.TypeAcquire, Owner: owner, Lease: lease, Key: []byte(key)})
		if o != answered || g.Type != wire.TypeGranted {
			t.Fatalf("acquire %s: %s %v %v", key, g.Type, o, err)
		}
		st.last = g.Token
		if i%2 == 1 {
			r, o, err := c.do(&wire.Frame{Type: wire.TypeRelease, Token: g.Token, Key: []byte(key)})
			if o != answered || r.Type != wire.TypeReleased {
				t.Fatalf("release %s: %s %v %v", key, r.Type, o, err)
			}
			st.released = append(st.released, key)
			continue
		}
		g.Owner = owner
		st.held[key] = g
	}
	return st
}

// checkRefusal: the server exited; it must say why, naming the data file
// (named), with a non-zero exit code and without a crash dump.
func checkRefusal(t *testing.T, p *proc, named string) {
	t.Helper()
	log, code := p.log(), p.exitCode()
	crashed := strings.Contains(log, "panic:") || strings.Contains(log, "fatal error:") || strings.Contains(log, "SIGBUS") || strings.Contains(log, "SIGSEGV")
	switch {
	case code == 0:
		t.Errorf("exited with code 0 on a damaged log\n%s", p.logTail(20))
	case crashed:
		t.Errorf("refuses to start, but by crashing (exit code %d), not with an error that names the data file:\n%s", code, crashExcerpt(log))
	case !strings.Contains(log, named):
		t.Errorf("refuses to start (exit code %d), but the message does not name the data file %s:\n%s", code, named, p.logTail(20))
	default:
		t.Logf("refuses to start (exit code %d): %s", code, lastLine(log))
	}
}

// checkSameState: the server serves; it must serve exactly the state it had.
func checkSameState(t *testing.T, p *proc, want corruptState) {
	t.Helper()
	c := newClient([]string{p.client})
	defer c.close()
	if err := c.connect(); err != nil {
		t.Fatalf("ready, but no hello: %v", err)
	}
	var wrong []string
	for key, g := range want.held {
		f, o, err := c.do(&wire.Frame{Type: wire.TypeDescribe, Key: []byte(key)})
		if o != answered {
			t.Fatalf("describe %s: %v %v\n%s", key, o, err, p.logTail(20))
		}
		if f.Flags&1 == 0 || f.Token != g.Token || f.Owner != g.Owner {
			wrong = append(wrong, fmt.Sprintf("%s: want token %d, got %s", key, g.Token, describeFrame(f)))
		}
	}
	for _, key := range want.released {
		f, o, err := c.do(&wire.Frame{Type: wire.TypeDescribe, Key: []byte(key)})
		if o != answered {
			t.Fatalf("describe %s: %v %v", key, o, err)
		}
		if f.Flags&1 != 0 {
			wrong = append(wrong, fmt.Sprintf("%s: released, got %s", key, describeFrame(f)))
		}
	}
	st, err := adminStatus(p.client)
	if err != nil {
		t.Fatal(err)
	}
	if st.Held != len(want.held) {
		wrong = append(wrong, fmt.Sprintf("status: %d held, want %d", st.Held, len(want.held)))
	}
	if st.LastToken != want.last {
		wrong = append(wrong, fmt.Sprintf("status: last token %d, want %d", st.LastToken, want.last))
	}
	g, o, err := c.do(&wire.Frame{Type: wire.TypeAcquire, Owner: wire.Owner{0xEE}, Lease: lease, Key: []byte("corrupt/new")})
	if o != answered || g.Type != wire.TypeGranted {
		t.Fatalf("acquire after start: %s %v %v", g.Type, o, err)
	}
	if g.Token <= want.last {
		wrong = append(wrong, fmt.Sprintf("a new grant has token %d, not above the last token %d granted before the damage", g.Token, want.last))
	}
	if len(wrong) > 0 {
		t.Errorf("serves a WRONG state from a damaged log, silently (%d differences):\n  %s\n%s", len(wrong), strings.Join(wrong, "\n  "), p.logTail(10))
		return
	}
	t.Logf("recovered the exact state (%d held, last token %d)", len(want.held), want.last)
}

func describeFrame(f wire.Frame) string {
	if f.Flags&1 == 0 {
		return "free"
	}
	return fmt.Sprintf("held by token %d owner %x", f.Token, f.Owner[:2])
}

// crashExcerpt is the start of a Go crash report: the message and the first frames.
func crashExcerpt(log string) string {
	lines := strings.Split(log, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") || strings.HasPrefix(l, "unexpected fault") {
			if i > 0 && strings.Contains(lines[i-1], "level=ERROR") {
				i--
			}
			return strings.Join(lines[i:min(len(lines), i+16)], "\n")
		}
	}
	return log
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// find returns the offset of every occurrence of s in file.
func find(t *testing.T, file, s string) []int64 {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(s))
		if j < 0 {
			break
		}
		out = append(out, int64(i+j))
		i += j + 1
	}
	if len(out) == 0 {
		t.Fatalf("%q is not in %s", s, file)
	}
	return out
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o750)
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		out, err := os.Create(dst)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, src); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatalf("copy %s: %v", from, err)
	}
}
