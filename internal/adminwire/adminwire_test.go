package adminwire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The bytes of every admin body must stay those the map-based encoders of
// both sides wrote before the types were shared: Java and C# clients, and
// the JSON examples in docs/protocol.md, rely on them.
func TestBodiesKeepTheirBytes(t *testing.T) {
	cases := []struct {
		name string
		typ  any
		old  any // the value the old code encoded
	}{
		{"status request", Request{Op: OpStatus}, map[string]any{"op": "status"}},
		{"members.add", Request{Op: OpMembersAdd, ID: "n4", RaftAddr: "10.0.0.4:5226"},
			map[string]any{"op": "members.add", "id": "n4", "raft_addr": "10.0.0.4:5226"}},
		{"members.remove", Request{Op: OpMembersRemove, ID: "n4"}, map[string]any{"op": "members.remove", "id": "n4"}},
		{"leader.transfer to any voter", Request{Op: OpLeaderTransfer}, map[string]any{"op": "leader.transfer"}},
		{"leader.transfer to one", Request{Op: OpLeaderTransfer, ID: "n2"}, map[string]any{"op": "leader.transfer", "id": "n2"}},
		{"snapshot.save", Request{Op: OpSnapshotSave}, map[string]any{"op": "snapshot.save"}},
		{"snapshot meta", SnapshotMeta{Index: 7, Term: 2, Size: 4096, SHA256: "ab12"},
			map[string]any{"index": uint64(7), "term": uint64(2), "size": int64(4096), "sha256": "ab12"}},
		{"not the leader", NotLeaderReply{Error: "this server is not the leader", LeaderAddr: "10.0.0.2:5225"},
			map[string]string{"error": "this server is not the leader", "leader_addr": "10.0.0.2:5225"}},
		{"not the leader, leader unknown", NotLeaderReply{Error: "this server is not the leader"},
			map[string]string{"error": "this server is not the leader", "leader_addr": ""}},
		{"failed", ErrorReply{Error: "no member with id \"n9\""}, map[string]string{"error": "no member with id \"n9\""}},
		{"transfer", TransferReply{LeaderID: "n2"}, map[string]string{"leader_id": "n2"}},
	}
	for _, c := range cases {
		got, err := json.Marshal(c.typ)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(c.old)
		if string(got) != string(want) {
			t.Errorf("%s: encodes as %s, the wire had %s", c.name, got, want)
		}
	}
}

// Status keeps the server's field order, and a member that never led has
// no client_addr (docs/protocol.md, Admin requests).
func TestStatusBytes(t *testing.T) {
	st := Status{NodeID: "n1", Role: "leader", LeaderID: "n1", LeaderAddr: "127.0.0.1:5225", Term: 3, CommitIndex: 9,
		AppliedIndex: 9, LastToken: 5, Held: 1, ClusterID: "none", Participants: []string{"n1"},
		Members: []Member{{ID: "n1", RaftAddr: "127.0.0.1:5226", ClientAddr: "127.0.0.1:5225", Voter: true, Leader: true}, {ID: "n2", RaftAddr: "127.0.0.1:6226", Voter: true}}}
	got, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"node_id":"n1","role":"leader","leader_id":"n1","leader_addr":"127.0.0.1:5225","term":3,"commit_index":9,"applied_index":9,"last_token":5,"held":1,"cluster_id":"none","participants":["n1"],` +
		`"members":[{"id":"n1","raft_addr":"127.0.0.1:5226","client_addr":"127.0.0.1:5225","voter":true,"leader":true},{"id":"n2","raft_addr":"127.0.0.1:6226","voter":true,"leader":false}]}`
	if string(got) != want {
		t.Fatalf("status encodes as\n%s\nwant\n%s", got, want)
	}
	var back Status
	if err := Decode("status", got, &back); err != nil || !reflect.DeepEqual(back, st) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

func TestDecodeSaysWhatFailed(t *testing.T) {
	var r Request
	err := Decode("the admin request", []byte(`{"op":`), &r)
	if err == nil || !strings.Contains(err.Error(), "the admin request is not the expected JSON object") {
		t.Fatalf("Decode of a truncated body: %v", err)
	}
	if err := Decode("the admin request", []byte(`{"op":"status","id":5}`), &r); err == nil {
		t.Fatal("Decode of an id that is a number succeeded")
	}
}

// FuzzDecodeRequest: any body either fails to decode or decodes to a
// request that encodes and decodes to itself; nothing panics.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{`{"op":"status"}`, `{"id":"n4","op":"members.add","raft_addr":"10.0.0.4:5226"}`,
		`{"op":"leader.transfer"}`, `[]`, `{"op":1}`, `{"op":"x","id":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r Request
		if Decode("the admin request", body, &r) != nil {
			return
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", r, err)
		}
		var r2 Request
		if err := Decode("the admin request", again, &r2); err != nil || r2 != r {
			t.Fatalf("round trip of %q: %+v then %+v (%v)", body, r, r2, err)
		}
	})
}
