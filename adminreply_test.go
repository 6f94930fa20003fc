package ticketing

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/ticketing-io/ticketing/internal/adminwire"
	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// scriptedAdmin answers every J with the V status and body of reply, and
// sends the bytes of each request it got on reqs.
func scriptedAdmin(t *testing.T, reqs chan<- string, reply func(op string) (uint16, string)) *faketicketd.Server {
	return faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{NodeID: "n1"}); err != nil {
			return
		}
		for {
			f, err := c.ReadType(wire.TypeAdmin)
			if err != nil {
				return
			}
			reqs <- string(f.Text)
			var req adminwire.Request
			if err := json.Unmarshal(f.Text, &req); err != nil {
				t.Errorf("the client sent an admin request that is not JSON: %q", f.Text)
				return
			}
			code, body := reply(req.Op)
			c.Send(wire.Frame{Type: wire.TypeAdminReply, ID: f.ID, Code: code, Text: []byte(body)})
		}
	})
}

// The requests' bytes are those the client always sent (docs/protocol.md,
// Admin requests; the Java and C# clients were checked against them).
func TestAdminRequestBytes(t *testing.T) {
	reqs := make(chan string, 8)
	srv := scriptedAdmin(t, reqs, func(op string) (uint16, string) {
		if op == adminwire.OpLeaderTransfer {
			return adminwire.StatusOK, `{"leader_id":"n2"}`
		}
		return adminwire.StatusOK, `{}`
	})
	a := dialAdmin(t, srv.Addr())
	ctx := ctxFor(t)
	steps := []struct {
		call func() error
		want string
	}{
		{func() error { _, err := a.Status(ctx); return err }, `{"op":"status"}`},
		{func() error { _, err := a.AddMember(ctx, "n4", "10.0.0.4:5226"); return err }, `{"id":"n4","op":"members.add","raft_addr":"10.0.0.4:5226"}`},
		{func() error { return a.RemoveMember(ctx, "n4") }, `{"id":"n4","op":"members.remove"}`},
		{func() error { _, err := a.TransferLeader(ctx, ""); return err }, `{"op":"leader.transfer"}`},
		{func() error { _, err := a.TransferLeader(ctx, "n2"); return err }, `{"id":"n2","op":"leader.transfer"}`},
	}
	for _, s := range steps {
		if err := s.call(); err != nil {
			t.Fatalf("%s: %v", s.want, err)
		}
		if got := <-reqs; got != s.want {
			t.Errorf("sent %s, want %s", got, s.want)
		}
	}
}

// A "not the leader" answer whose body does not decode is still
// ErrNotLeader, and the decode error is reported, not dropped.
func TestAdminNotLeaderBodyThatDoesNotDecode(t *testing.T) {
	reqs := make(chan string, 8)
	srv := scriptedAdmin(t, reqs, func(string) (uint16, string) { return adminwire.StatusNotLeader, `not the leader, ask n2` })
	a := dialAdmin(t, srv.Addr())
	err := a.RemoveMember(ctxFor(t), "n4")
	var se *json.SyntaxError
	var nl *NotLeaderError
	if !errors.Is(err, ErrNotLeader) || !errors.As(err, &se) || !errors.As(err, &nl) || nl.LeaderAddr != "" {
		t.Fatalf("RemoveMember answered status 1 with a body that is not JSON: %v; want ErrNotLeader, a *NotLeaderError without an address and the JSON error", err)
	}
	want := "ticketing: admin members.remove: the node " + srv.Addr() +
		" answered that it is not the leader, in JSON that does not decode, so the leader's address is unknown (the not-the-leader answer is not the expected JSON object: " + se.Error() + ")"
	if err.Error() != want {
		t.Errorf("error text\n%s\nwant\n%s", err, want)
	}
}

// The text of an error that quotes another error of this package names
// "ticketing:" once, at the start.
func TestAdminNotLeaderErrorText(t *testing.T) {
	reqs := make(chan string, 8)
	srv := scriptedAdmin(t, reqs, func(string) (uint16, string) {
		return adminwire.StatusNotLeader, `{"error":"this server is not the leader","leader_addr":"10.0.0.2:5225"}`
	})
	a := dialAdmin(t, srv.Addr())
	err := a.RemoveMember(ctxFor(t), "n4")
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderAddr != "10.0.0.2:5225" {
		t.Fatalf("RemoveMember on a follower: %v", err)
	}
	want := "ticketing: admin members.remove: " + srv.Addr() + " is not the leader; the leader is 10.0.0.2:5225"
	if err.Error() != want {
		t.Errorf("error text\n%s\nwant\n%s", err, want)
	}
}
