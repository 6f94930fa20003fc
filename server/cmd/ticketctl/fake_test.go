package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// These tests run ticketctl against faketicketd, a scripted server, for the
// answers a real cluster gives only under load or failure.

// answerFirst completes the hello, reads frames until one of type t, and
// lets reply answer it.
func answerFirst(t wire.Type, reply func(c *faketicketd.Conn, f wire.Frame)) faketicketd.Handler {
	return func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{}); err != nil {
			return
		}
		f, err := c.ReadType(t)
		if err != nil {
			return
		}
		reply(c, f)
		<-c.Done()
	}
}

func decodeOne(t *testing.T, stdout string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	if dec.More() {
		t.Fatalf("stdout %q holds more than one JSON value", stdout)
	}
}

func TestAcquireOutcomesFake(t *testing.T) {
	tests := []struct {
		name    string
		reply   func(c *faketicketd.Conn, f wire.Frame)
		code    int
		json    string
		message string
	}{
		{
			name: "capacity",
			reply: func(c *faketicketd.Conn, f wire.Frame) {
				c.Send(wire.Frame{Type: wire.TypeCapacity, ID: f.ID, Reason: wire.CapacityHeld})
			},
			code: exitCapacity, json: "capacity", message: "capacity",
		},
		{
			name:  "connection dropped after the acquire",
			reply: func(c *faketicketd.Conn, f wire.Frame) { c.Close() },
			code:  exitIndeterminate, json: "indeterminate", message: "",
		},
		{
			name: "server shutting down after the acquire",
			reply: func(c *faketicketd.Conn, f wire.Frame) {
				c.Error(wire.CodeShuttingDown, "bye")
			},
			code: exitIndeterminate, json: "indeterminate", message: "",
		},
		{
			name: "not acquired",
			reply: func(c *faketicketd.Conn, f wire.Frame) {
				c.Send(wire.Frame{Type: wire.TypeNotAcquired, ID: f.ID})
			},
			code: exitNotAcquired, json: "not_acquired", message: "not acquired",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := faketicketd.Start(t, answerFirst(wire.TypeAcquire, tc.reply))
			code, stdout, stderr := ctl(t, "--addr", srv.Addr(), "acquire", "k", "--lease", "10s", "-o", "json")
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, stderr)
			}
			var got errorResult
			decodeOne(t, stdout, &got)
			if got.Code != tc.json || !strings.Contains(got.Error, tc.message) || !strings.Contains(stderr, got.Error) {
				t.Errorf("got %+v, stderr %q", got, stderr)
			}
		})
	}
}

func TestAcquireDurationsOnTheWire(t *testing.T) {
	frames := make(chan wire.Frame, 1)
	srv := faketicketd.Start(t, answerFirst(wire.TypeAcquire, func(c *faketicketd.Conn, f wire.Frame) {
		frames <- f
		c.Send(wire.Frame{Type: wire.TypeGranted, ID: f.ID, Token: 77, LeaseMs: uint32(f.Lease) * 1000})
	}))
	code, stdout, stderr := ctl(t, "acquire", "--addr", srv.Addr(), "k", "--wait", "1500ms", "--lease", "1m", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	f := <-frames
	if f.Wait != 2 || f.Lease != 60 || string(f.Key) != "k" {
		t.Errorf("acquire frame wait=%d lease=%d key=%q, want 2 (1500ms rounded up), 60, k", f.Wait, f.Lease, f.Key)
	}
	var got acquireResult
	decodeOne(t, stdout, &got)
	if got.Key != "k" || got.Token != 77 || got.LeaseMs != 60000 || got.Deadline == "" {
		t.Errorf("result %+v", got)
	}
}

func TestAcquireOutOfRangeDurations(t *testing.T) {
	srv := faketicketd.Start(t, faketicketd.Serve(faketicketd.NewLocks(), faketicketd.Ready{}))
	for _, args := range [][]string{
		{"acquire", "k", "--lease", "251s"},
		{"acquire", "k", "--lease", "-1s"},
		{"acquire", "k", "--lease", "5s", "--wait", "256s"},
	} {
		code, _, stderr := ctl(t, append(args, "--addr", srv.Addr())...)
		if code != exitError || !strings.Contains(stderr, "nothing was sent") {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
}

func TestAuthenticationFailureFake(t *testing.T) {
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.Read(); err != nil {
			return
		}
		c.Error(wire.CodeUnauthenticated, "bad token")
	})
	for _, args := range [][]string{
		{"acquire", "k", "--lease", "5s"},
		{"describe", "k"},
		{"release", "k", "3"},
		{"status"},
		{"members", "remove", "n2"},
	} {
		code, _, stderr := ctl(t, append(args, "--addr", srv.Addr(), "--token", "wrong")...)
		if code != exitError || !strings.Contains(stderr, "authentication failed") {
			t.Errorf("%q: exit %d, stderr %q", args, code, stderr)
		}
	}
}

func TestReleaseFake(t *testing.T) {
	tests := []struct {
		name  string
		reply func(c *faketicketd.Conn, f wire.Frame)
		code  int
		retry bool // the answer is lost on every connection: retried for 5 s
	}{
		{"released", func(c *faketicketd.Conn, f wire.Frame) {
			// A ping before the answer must be answered and skipped.
			c.Send(wire.Frame{Type: wire.TypePing, Nonce: 9})
			c.Send(wire.Frame{Type: wire.TypeReleased, ID: f.ID})
		}, exitOK, false},
		{"not held", func(c *faketicketd.Conn, f wire.Frame) { c.Send(wire.Frame{Type: wire.TypeNotHeld, ID: f.ID}) }, exitNotAcquired, false},
		{"capacity", func(c *faketicketd.Conn, f wire.Frame) {
			c.Send(wire.Frame{Type: wire.TypeCapacity, ID: f.ID, Reason: wire.CapacityInFlight})
		}, exitCapacity, false},
		{"dropped", func(c *faketicketd.Conn, f wire.Frame) { c.Close() }, exitIndeterminate, true},
		{"lost leadership", func(c *faketicketd.Conn, f wire.Frame) { c.NotLeader("") }, exitIndeterminate, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.retry {
				t.Parallel() // each takes the whole release bound
			}
			var mu sync.Mutex
			var frames []wire.Frame
			srv := faketicketd.Start(t, answerFirst(wire.TypeRelease, func(c *faketicketd.Conn, f wire.Frame) {
				mu.Lock()
				frames = append(frames, f)
				mu.Unlock()
				tc.reply(c, f)
			}))
			code, stdout, stderr := ctl(t, "release", "orders/7", "12345", "--addr", srv.Addr(), "-o", "json")
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, stderr)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(frames) == 0 || (tc.retry && len(frames) < 2) || (!tc.retry && len(frames) != 1) {
				t.Errorf("%d releases sent", len(frames))
			}
			for _, f := range frames {
				if string(f.Key) != "orders/7" || f.Token != 12345 {
					t.Errorf("release frame key %q token %d", f.Key, f.Token)
				}
			}
			if code == exitOK {
				var got releaseResult
				decodeOne(t, stdout, &got)
				if got != (releaseResult{Key: "orders/7", Token: 12345, Released: true}) {
					t.Errorf("result %+v", got)
				}
			}
			if tc.retry && !strings.Contains(stderr, "outcome unknown") {
				t.Errorf("stderr %q", stderr)
			}
		})
	}
}

func TestReleaseFollowsLeader(t *testing.T) {
	locks := faketicketd.NewLocks()
	leader := faketicketd.Start(t, faketicketd.Serve(locks, faketicketd.Ready{NodeID: "leader"}))
	follower := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.Read(); err != nil {
			return
		}
		c.NotLeader(leader.Addr())
	})
	// Take a ticket on the leader, then release it through the follower.
	code, stdout, stderr := ctl(t, "--addr", leader.Addr(), "acquire", "k", "--lease", "30s", "-o", "json")
	if code != exitOK {
		t.Fatalf("acquire: exit %d: %s", code, stderr)
	}
	var got acquireResult
	decodeOne(t, stdout, &got)
	if tok, held := locks.Holder("k"); !held || tok != got.Token {
		t.Fatalf("after acquire the fake holds %d %v, want %d: the ticket must outlive ticketctl", tok, held, got.Token)
	}
	token := jsonNumber(got.Token)
	if code, _, stderr := ctl(t, "--addr", follower.Addr(), "release", "k", token); code != exitOK {
		t.Fatalf("release via follower: exit %d: %s", code, stderr)
	}
	if _, held := locks.Holder("k"); held {
		t.Error("the key is still held after release")
	}
	if code, _, _ := ctl(t, "--addr", follower.Addr()+","+leader.Addr(), "release", "k", token); code != exitNotAcquired {
		t.Errorf("second release: exit %d, want %d", code, exitNotAcquired)
	}
}

func TestAdminFollowsLeader(t *testing.T) {
	ops := make(chan map[string]any, 1)
	leader := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{NodeID: "n1"}); err != nil {
			return
		}
		f, err := c.ReadType(wire.TypeAdmin)
		if err != nil {
			return
		}
		var req map[string]any
		json.Unmarshal(f.Text, &req)
		ops <- req
		c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: f.ID, Text: []byte(`{}`)})
		<-c.Done()
	})
	follower := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{NodeID: "n2", Follower: true}); err != nil {
			return
		}
		f, err := c.ReadType(wire.TypeAdmin)
		if err != nil {
			return
		}
		body, _ := json.Marshal(map[string]string{"leader_addr": leader.Addr()})
		c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: f.ID, Code: 1, Text: body})
		<-c.Done()
	})
	code, stdout, stderr := ctl(t, "members", "add", "n4", "10.0.0.4:5226", "--addr", follower.Addr(), "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	req := <-ops
	if req["op"] != "members.add" || req["id"] != "n4" || req["raft_addr"] != "10.0.0.4:5226" {
		t.Errorf("leader got %v", req)
	}
	var got membersResult
	decodeOne(t, stdout, &got)
	if !got.OK || got.Leader != leader.Addr() || got.ID != "n4" {
		t.Errorf("result %+v", got)
	}
}

func TestAdminUnreachableTriesNext(t *testing.T) {
	ops := make(chan string, 1)
	leader := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{}); err != nil {
			return
		}
		f, err := c.ReadType(wire.TypeAdmin)
		if err != nil {
			return
		}
		ops <- string(f.Text)
		c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: f.ID, Text: []byte(`{"leader_id":"n3"}`)})
		<-c.Done()
	})
	dead := faketicketd.Start(t, func(c *faketicketd.Conn) {})
	deadAddr := dead.Addr()
	dead.Close()
	code, stdout, stderr := ctl(t, "leader", "transfer", "n3", "--addr", deadAddr+","+leader.Addr())
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if op := <-ops; !strings.Contains(op, `"leader.transfer"`) || !strings.Contains(op, `"n3"`) {
		t.Errorf("leader got %s", op)
	}
	if !strings.Contains(stdout, "to n3") {
		t.Errorf("stdout %q", stdout)
	}
}

// A cluster-changing admin operation whose answer is lost may have been
// applied: ticketctl reports it as indeterminate (exit 4) and does not send
// it to the next address.
func TestAdminLostAnswerNotRetriedElsewhere(t *testing.T) {
	first := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{}); err != nil {
			return
		}
		c.ReadType(wire.TypeAdmin) // then the connection drops, unanswered
	})
	second := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{}); err != nil {
			return
		}
		if f, err := c.ReadType(wire.TypeAdmin); err == nil {
			c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: f.ID, Text: []byte(`{"leader_id":"n3"}`)})
		}
		<-c.Done()
	})
	for _, args := range [][]string{{"members", "remove", "n4"}, {"leader", "transfer", "n3"}, {"members", "add", "n4", "10.0.0.4:5226"}} {
		code, _, stderr := ctl(t, append(args, "--addr", first.Addr()+","+second.Addr())...)
		if code != exitIndeterminate {
			t.Errorf("%v with the answer lost: exit %d (%s), want %d", args, code, stderr, exitIndeterminate)
		}
		if !strings.Contains(stderr, "may or may not have been applied") || !strings.Contains(stderr, "ticketctl status") {
			t.Errorf("%v: stderr %q does not say the outcome is unknown and what to do", args, stderr)
		}
	}
	if n := second.Accepted(); n != 0 {
		t.Errorf("the operation was sent on to the next node (%d sessions)", n)
	}
}

func jsonNumber(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestSnapshotSaveFake(t *testing.T) {
	chunks := [][]byte{[]byte("hello "), []byte("snapshot")}
	serve := func(meta string) faketicketd.Handler {
		return func(c *faketicketd.Conn) {
			h, err := c.AcceptHello(faketicketd.Ready{NodeID: "n1"})
			if err != nil {
				return
			}
			f, err := c.ReadType(wire.TypeAdmin)
			if err != nil {
				return
			}
			if h.Flags&wire.HelloAdmin == 0 {
				c.Error(wire.CodeNotAllowed, "not an admin session")
				return
			}
			switch string(f.Text) {
			case `{"op":"status"}`:
				c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: f.ID, Text: []byte(`{"node_id":"n1","role":"leader"}`)})
			case `{"op":"snapshot.save"}`:
				for _, ch := range chunks {
					c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: f.ID, Code: 3, Text: ch})
				}
				c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: f.ID, Code: 0, Text: []byte(meta)})
			}
			<-c.Done()
		}
	}
	// sha256("hello snapshot")
	const sum = "9459cf481d2126a7dc101213ac71e50b9c39d5ae13b7c4302480f2596c9cfe70"
	good := faketicketd.Start(t, serve(`{"index":7,"term":2,"size":14,"sha256":"`+sum+`"}`))
	file := t.TempDir() + "/s.snap"
	var got snapshotResult
	decodeOne(t, mustCtl(t, exitOK, "snapshot", "save", file, "--addr", good.Addr(), "-o", "json"), &got)
	if got.Index != 7 || got.Term != 2 || got.Size != 14 || got.Node != good.Addr() || got.SHA256 != sum {
		t.Errorf("result %+v", got)
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != "hello snapshot" {
		t.Errorf("file holds %q, %v", data, err)
	}

	for name, meta := range map[string]string{
		"size mismatch":     `{"index":7,"term":2,"size":15}`,
		"checksum mismatch": `{"index":7,"term":2,"size":14,"sha256":"` + sum[:63] + `1"}`,
	} {
		t.Run(name, func(t *testing.T) {
			bad := faketicketd.Start(t, serve(meta))
			dir := t.TempDir()
			code, _, stderr := ctl(t, "snapshot", "save", dir+"/s.snap", "--addr", bad.Addr())
			if code != exitError || !strings.Contains(stderr, "was not written") {
				t.Errorf("exit %d, stderr %q", code, stderr)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("left files behind: %v", entries)
			}
		})
	}
}

// TestMembersAddStillLearner: a server that has not caught up within
// --wait is reported as a learner, exit code 2 (code "learner"), with how
// far it is and what to do; the request is repeated while --wait lasts.
func TestMembersAddStillLearner(t *testing.T) {
	var asked atomic.Int32
	leader := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{NodeID: "n1"}); err != nil {
			return
		}
		for {
			f, err := c.ReadType(wire.TypeAdmin)
			if err != nil {
				return
			}
			idx := 0
			if asked.Add(1) == 1 {
				idx = 12 // only the first request adds it
			}
			c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: f.ID, Text: []byte(fmt.Sprintf(`{"learner":true,"learner_index":%d,"promoted_index":0,"match_index":3,"commit_index":40}`, idx))})
		}
	})
	code, stdout, stderr := ctl(t, "members", "add", "n4", "10.0.0.4:5226", "--addr", leader.Addr(), "--wait", "300ms")
	if code != exitNotAcquired {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitNotAcquired, stdout, stderr)
	}
	for _, want := range []string{"is a learner, not yet a voter", "index 3 of the leader's commit index 40", "members add n4 10.0.0.4:5226 again"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q: %s", want, stderr)
		}
	}
	if !strings.Contains(stdout, "as a learner at index 12") {
		t.Errorf("stdout does not report the learner's index: %s", stdout)
	}
	code, stdout, _ = ctl(t, "members", "add", "n4", "10.0.0.4:5226", "--addr", leader.Addr(), "--wait", "0s", "-o", "json")
	var got errorResult
	decodeOne(t, stdout, &got)
	if code != exitNotAcquired || got.Code != "learner" {
		t.Errorf("-o json: exit %d, %+v", code, got)
	}
}
