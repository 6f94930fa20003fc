package ticketing

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Tests of Describe and of the admin API (docs/protocol.md, "Admin requests").

func TestDescribe(t *testing.T) {
	l := newLocks(t)
	srv := faketicketd.Start(t, faketicketd.Serve(l, faketicketd.Ready{}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	tk, err := b.Acquire(ctx, "k", time.Second, 30*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := b.Describe(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Held || d.Token != tk.Token() || d.Lease != 30*time.Second || d.Remaining <= 0 || d.Remaining > 30*time.Second || d.Waiters != 0 || d.Key != "k" {
		t.Errorf("held key: %+v", d)
	}
	tk.Release(ctx)
	if d, err = b.Describe(ctx, "k"); err != nil || d.Held || d.Token != 0 {
		t.Errorf("free key: %+v, %v", d, err)
	}
}

// A capacity reject (B) is a valid answer to a describe: it fails the
// describe with ErrCapacity and leaves the session and the acquire on it
// alone.
func TestDescribeCapacityRejectKeepsSession(t *testing.T) {
	r := newRec()
	acq := make(chan wire.Frame, 1)
	var conn atomic.Pointer[faketicketd.Conn]
	srv := faketicketd.Start(t, script(r, faketicketd.Ready{}, func(c *faketicketd.Conn, f wire.Frame) bool {
		conn.Store(c)
		switch f.Type {
		case wire.TypeAcquire:
			c.Send(wire.Frame{Type: wire.TypeQueued, ID: f.ID, Count: 1})
			acq <- f
		case wire.TypeDescribe:
			c.Send(wire.Frame{Type: wire.TypeCapacity, ID: f.ID, Reason: wire.CapacityInFlight})
		}
		return true
	}))
	b := connect(t, srv.Addr())
	ctx := ctxFor(t)
	got := make(chan error, 1)
	go func() {
		tk, err := b.Acquire(ctx, "k", 30*time.Second, 30*time.Second, 0)
		if err == nil && tk.Token() != 7 {
			err = errors.New("wrong token")
		}
		got <- err
	}()
	fa := <-acq
	_, err := b.Describe(ctx, "k")
	var ce *CapacityError
	if !errors.Is(err, ErrCapacity) || !errors.As(err, &ce) || ce.Reason != CapacityInFlight {
		t.Fatalf("describe answered B: %v, want ErrCapacity reason 4", err)
	}
	conn.Load().Send(wire.Frame{Type: wire.TypeGranted, ID: fa.ID, Token: 7, LeaseMs: 30000})
	if err := <-got; err != nil {
		t.Fatalf("the acquire on the same session: %v", err)
	}
	if n := srv.Accepted(); n != 1 {
		t.Errorf("%d sessions, want 1: the B ended the session", n)
	}
}

// A server that keeps the connection alive (pings) but never answers a
// describe or an admin status cannot hold the caller beyond the answer
// bound, whatever its context.
func TestDescribeAndAdminAnswersAreBounded(t *testing.T) {
	pinger := func(c *faketicketd.Conn) {
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				c.Send(wire.Frame{Type: wire.TypePing, Nonce: 1})
			case <-c.Done():
				return
			}
		}
	}
	mute := func(c *faketicketd.Conn) {
		h, err := c.Read()
		if err != nil {
			return
		}
		c.Send(faketicketd.Ready{Interval: 30 * time.Millisecond, Follower: h.Flags&wire.HelloAdmin != 0}.Frame())
		go pinger(c)
		for {
			if _, err := c.Read(); err != nil {
				return
			}
		}
	}
	srv := faketicketd.Start(t, mute)
	grace := withCfg(func(c *config) { c.AnswerGrace = 50 * time.Millisecond })
	b := connect(t, srv.Addr(), grace)
	bounded := func(what string, call func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			return err
		case <-time.After(patience):
			t.Fatalf("%s: a server that never answers held the call without bound", what)
			return nil
		}
	}
	err := bounded("describe", func() error { _, err := b.Describe(context.Background(), "k"); return err })
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("describe never answered: %v, want ErrUnavailable", err)
	}
	a, err := DialAdmin(ctxFor(t), srv.Addr(), quiet, grace)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	err = bounded("status", func() error { _, err := a.Status(context.Background()); return err })
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrIndeterminate) {
		t.Fatalf("status never answered: %v, want ErrUnavailable", err)
	}
	err = bounded("members.remove", func() error { return a.RemoveMember(context.Background(), "n2") })
	if !errors.Is(err, ErrIndeterminate) {
		t.Fatalf("members.remove never answered: %v, want ErrIndeterminate", err)
	}
	if n := srv.Accepted(); n != 2 {
		t.Errorf("%d sessions, want 2 (the broker's and the admin's, both kept)", n)
	}
}

func TestAdmin(t *testing.T) {
	r := newRec()
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		h, err := c.Read()
		if err != nil {
			return
		}
		if h.Flags&wire.HelloAdmin == 0 {
			c.Error(wire.CodeNotAllowed, "expected an admin hello")
			return
		}
		c.Send(faketicketd.Ready{NodeID: "n1", Follower: true}.Frame())
		for {
			f, err := c.Read()
			if err != nil {
				return
			}
			r.add(c, f)
			var req map[string]any
			json.Unmarshal(f.Text, &req)
			reply := func(code uint16, body string) {
				c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: f.ID, Code: code, Text: []byte(body)})
			}
			switch req["op"] {
			case "status":
				reply(0, `{"node_id":"n1","role":"follower","leader_id":"n2","leader_addr":"10.0.0.2:5225","term":3,
					"commit_index":10,"applied_index":9,"last_token":7,"held":1,
					"members":[{"id":"n1","raft_addr":"10.0.0.1:7000","client_addr":"10.0.0.1:5225","voter":true,"leader":false}]}`)
			case "members.add":
				reply(1, `{"leader_addr":"10.0.0.2:5225"}`)
			case "members.remove":
				reply(2, `{"error":"no such member"}`)
			case "leader.transfer":
				reply(0, `{"leader_id":"n3"}`)
			}
		}
	})
	ctx := ctxFor(t)
	a, err := DialAdmin(ctx, srv.Addr(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.NodeID() != "n1" {
		t.Errorf("node id %q", a.NodeID())
	}
	st, err := a.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.NodeID != "n1" || st.Role != "follower" || st.LeaderAddr != "10.0.0.2:5225" || st.Term != 3 || st.LastToken != 7 ||
		len(st.Members) != 1 || st.Members[0].RaftAddr != "10.0.0.1:7000" || !st.Members[0].Voter {
		t.Errorf("status: %+v", st)
	}
	_, err = a.AddMember(ctx, "n4", "10.0.0.4:7000")
	var nl *NotLeaderError
	if !errors.Is(err, ErrNotLeader) || !errors.As(err, &nl) || nl.LeaderAddr != "10.0.0.2:5225" {
		t.Errorf("AddMember on a follower: %v", err)
	}
	add := r.wait(t, 2, isType(wire.TypeAdmin))
	var req map[string]string
	if json.Unmarshal(add.f.Text, &req); req["op"] != "members.add" || req["id"] != "n4" || req["raft_addr"] != "10.0.0.4:7000" {
		t.Errorf("members.add request %s", add.f.Text)
	}
	err = a.RemoveMember(ctx, "n9")
	var ae *AdminError
	if !errors.As(err, &ae) || ae.Message != "no such member" {
		t.Errorf("RemoveMember: %v", err)
	}
	if id, err := a.TransferLeader(ctx, ""); err != nil || id != "n3" {
		t.Errorf("TransferLeader: %q, %v", id, err)
	}
	a.Close()
	if _, err := a.Status(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Status after Close: %v", err)
	}
}

func TestDialAdminErrors(t *testing.T) {
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.Read(); err == nil {
			c.Error(wire.CodeUnauthenticated, "bad token")
		}
	})
	ctx := ctxFor(t)
	if _, err := DialAdmin(ctx, srv.Addr(), quiet); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("refused token: %v", err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	if _, err := DialAdmin(ctx, addr, quiet); !errors.Is(err, ErrUnavailable) {
		t.Errorf("nobody listening: %v", err)
	}
	if _, err := DialAdmin(ctx, "a:1,b:2"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("two addresses: %v", err)
	}
}

// A cluster-changing admin operation whose answer is lost may have been
// applied: it is ErrIndeterminate, not ErrUnavailable (which a tool would
// retry on another node). A lost status answer is ErrUnavailable.
func TestAdminLostAnswerIsIndeterminate(t *testing.T) {
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{Follower: true}); err != nil {
			return
		}
		c.ReadType(wire.TypeAdmin) // then drop the connection, unanswered
	})
	ctx := ctxFor(t)
	ops := map[string]func(a *Admin) error{
		"members.add":     func(a *Admin) error { _, err := a.AddMember(ctx, "n4", "127.0.0.1:7004"); return err },
		"members.remove":  func(a *Admin) error { return a.RemoveMember(ctx, "n4") },
		"leader.transfer": func(a *Admin) error { _, err := a.TransferLeader(ctx, ""); return err },
		"status":          func(a *Admin) error { _, err := a.Status(ctx); return err },
	}
	for op, call := range ops {
		a, err := DialAdmin(ctx, srv.Addr(), quiet)
		if err != nil {
			t.Fatal(err)
		}
		err = call(a)
		a.Close()
		if op == "status" {
			if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrIndeterminate) {
				t.Errorf("%s, answer lost: %v, want ErrUnavailable", op, err)
			}
			continue
		}
		if !errors.Is(err, ErrIndeterminate) || errors.Is(err, ErrUnavailable) {
			t.Errorf("%s, answer lost: %v, want ErrIndeterminate and not ErrUnavailable", op, err)
		}
		if !strings.Contains(err.Error(), "may or may not have been applied") {
			t.Errorf("%s: the message does not say the outcome is unknown: %v", op, err)
		}
	}
}
