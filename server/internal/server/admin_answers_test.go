package server_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/internal/adminwire"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// The server's admin answers are the shared adminwire bodies, with the
// bytes it always sent: a request that does not decode is answered
// "failed" saying so; the failure, status and snapshot bodies have exactly
// the documented fields, in the server's order.
func TestAdminAnswersAreTheSharedBodies(t *testing.T) {
	c := testcluster.Start(t, 1)
	c.LeaderIndex(t)
	a := testcluster.DialRaw(t, c.Addr(0))
	a.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Flags: wire.HelloAdmin})
	expect(t, a.Recv(), wire.TypeReady)
	ask := func(body string) wire.Frame {
		t.Helper()
		id := a.ID()
		a.Send(&wire.Frame{Type: wire.TypeAdmin, ID: id, Text: []byte(body)})
		return expect(t, a.Final(id), wire.TypeAdminReply)
	}

	for _, body := range []string{`{"op":`, `{"op":"status","id":5}`, `[]`} {
		f := ask(body)
		var fe adminwire.ErrorReply
		if f.Code != adminwire.StatusFailed || adminwire.Decode("failure", f.Text, &fe) != nil ||
			!strings.HasPrefix(fe.Error, "the admin request is not the expected JSON object: ") {
			t.Errorf("request %s: status %d %s, want status 2 saying the request does not decode", body, f.Code, f.Text)
		}
	}
	if f := ask(`{"op":"members.remove","id":"nobody"}`); f.Code != adminwire.StatusFailed || string(f.Text) != `{"error":"no member with id \"nobody\""}` {
		t.Errorf("members.remove of an unknown id: status %d %s", f.Code, f.Text)
	}

	f := ask(`{"op":"status"}`)
	dec := json.NewDecoder(bytes.NewReader(f.Text))
	dec.DisallowUnknownFields()
	var st adminwire.Status
	if f.Code != adminwire.StatusOK || dec.Decode(&st) != nil || st.NodeID == "" || st.Role != "leader" || len(st.Members) != 1 {
		t.Fatalf("status: %d %s", f.Code, f.Text)
	}
	if again, _ := json.Marshal(st); !bytes.Equal(again, f.Text) {
		t.Errorf("status bytes\n%s\nare not the shared type's\n%s", f.Text, again)
	}

	id := a.ID()
	a.Send(&wire.Frame{Type: wire.TypeAdmin, ID: id, Text: []byte(`{"op":"snapshot.save"}`)})
	for {
		f := expect(t, a.Final(id), wire.TypeAdminReply)
		if f.Code == adminwire.StatusChunk {
			continue
		}
		meta := regexp.MustCompile(`^\{"index":[0-9]+,"sha256":"[0-9a-f]{64}","size":[0-9]+,"term":[0-9]+\}$`)
		if f.Code != adminwire.StatusOK || !meta.Match(f.Text) {
			t.Errorf("snapshot.save final answer: status %d %s", f.Code, f.Text)
		}
		break
	}
}
