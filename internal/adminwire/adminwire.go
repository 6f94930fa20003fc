// Package adminwire is the vocabulary of admin requests (J frames) and their
// answers (V frames), shared by the client (ticketing.Admin) and the server
// so that it is written once: the op names, the V status codes and the JSON
// bodies. docs/protocol.md (Admin requests) is the reference; Java and C#
// clients rely on the same bytes.
//
// The JSON field order of each type is the order the server has always
// written, so that the bytes on the wire do not change.
package adminwire

import (
	"encoding/json"
	"fmt"
)

// Admin ops (the "op" field of a J request).
const (
	OpStatus         = "status"
	OpMembersAdd     = "members.add"
	OpMembersRemove  = "members.remove"
	OpLeaderTransfer = "leader.transfer"
	OpSnapshotSave   = "snapshot.save"
	// OpConsole reads one page of the operator's console from the leader
	// (Page, Prefix, After); the answer is a JSON view streamed in
	// StatusChunk pieces, then a final ConsoleDone.
	OpConsole = "console"
)

// V status codes (the frame's code field).
const (
	// StatusOK: the op's answer, a JSON object (final).
	StatusOK uint16 = 0
	// StatusNotLeader: a leader-only op sent to a follower; the body is a
	// NotLeaderReply (final).
	StatusNotLeader uint16 = 1
	// StatusFailed: the op failed; the body is an ErrorReply (final).
	StatusFailed uint16 = 2
	// StatusChunk: one piece of a streamed answer (snapshot.save), raw bytes,
	// not JSON; not final.
	StatusChunk uint16 = 3
)

// SnapshotChunk is the largest piece of a snapshot the server puts in one V
// status-StatusChunk frame (60 KiB, under the 64 KiB frame limit).
const SnapshotChunk = 60 << 10

// Request is the body of a J frame. ID and RaftAddr are the arguments of
// the membership and transfer ops, left out when empty.
type Request struct {
	// Fields in alphabetical order: the bytes are those the client has
	// always sent (it used to encode a map).
	After    string `json:"after,omitempty"` // console: the tickets page's cursor
	End      int64  `json:"end,omitempty"`   // console: with sort "left", the cursor's lease end (Unix ms)
	ID       string `json:"id,omitempty"`
	Last     bool   `json:"last,omitempty"` // console: the tickets page's last page
	Op       string `json:"op"`
	Page     string `json:"page,omitempty"`   // console: which page
	Prefix   string `json:"prefix,omitempty"` // console: the tickets page's key prefix
	RaftAddr string `json:"raft_addr,omitempty"`
	Sort     string `json:"sort,omitempty"` // console: "left" orders the tickets by time left
}

// SortLeft is the console request's sort that orders the tickets by time
// left.
const SortLeft = "left"

// ConsoleDone is the final answer (status StatusOK) of op "console", after
// the chunks: how many bytes they carried together.
type ConsoleDone struct {
	Size int `json:"size"`
}

// Status is a node's own view of the cluster (the answer to op "status").
type Status struct {
	NodeID       string `json:"node_id"`
	Role         string `json:"role"` // leader, follower, candidate
	LeaderID     string `json:"leader_id"`
	LeaderAddr   string `json:"leader_addr"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	LastToken    uint64 `json:"last_token"`
	Held         int    `json:"held"`
	// ClusterID identifies the cluster's history (32 hex digits, "none"
	// before its first leader set it); Participants are the servers recorded
	// as holding its state: one of them that shows up empty is refused (it
	// lost data). See docs/deployment.md, Cluster identity.
	ClusterID    string   `json:"cluster_id"`
	Participants []string `json:"participants"`
	Members      []Member `json:"members"`
	// Version is the answering server's release (its ticketd --version);
	// empty (left out) from a server older than this field.
	Version string `json:"version,omitempty"`
}

// Member is one server of the cluster configuration.
type Member struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	// ClientAddr is the member's advertise address as recorded by its last
	// takeover as leader; empty (left out of the JSON) for a member that
	// never led.
	ClientAddr string `json:"client_addr,omitempty"`
	Voter      bool   `json:"voter"` // false: a learner, catching up before its promotion
	Leader     bool   `json:"leader"`
	// In the leader's answer only, for the other members: the last log
	// index the member acknowledged in this term (a learner is promoted
	// once it reaches the commit index), and whether the leader heard from
	// it within the election timeout.
	MatchIndex uint64 `json:"match_index,omitempty"`
	Reachable  *bool  `json:"reachable,omitempty"`
}

// MemberAdded is the answer to op "members.add". The server is added as a
// learner (a non-voter: it receives the log but counts towards no
// majority) and the leader promotes it to voter once it has caught up; the
// answer comes when it is a voter, or after a few seconds while it is
// still a learner. Repeating the request is safe: it adds nothing twice,
// and waits again. A server from before learners answers {} once it has
// added a voter: every field zero, Learner false.
type MemberAdded struct {
	// Learner: the server is still a learner (not yet caught up).
	Learner bool `json:"learner"`
	// LearnerIndex: the Raft index of the configuration that made it a
	// learner; 0 when the request found it a member already.
	LearnerIndex uint64 `json:"learner_index"`
	// PromotedIndex: the index of the configuration that made it a voter,
	// when the leader answering promoted it; 0 while it is a learner, and
	// for a voter promoted under an earlier leader.
	PromotedIndex uint64 `json:"promoted_index"`
	// MatchIndex is the last log index the server acknowledged to the
	// leader, CommitIndex the leader's commit index: how far it has to go.
	MatchIndex  uint64 `json:"match_index"`
	CommitIndex uint64 `json:"commit_index"`
}

// TransferReply is the answer to op "leader.transfer".
type TransferReply struct {
	LeaderID string `json:"leader_id"`
}

// SnapshotMeta is the final answer (status StatusOK) of op "snapshot.save",
// after the chunks.
type SnapshotMeta struct {
	// Fields in alphabetical order: the bytes the server has always sent.
	Index  uint64 `json:"index"`  // the last Raft log index the snapshot includes
	SHA256 string `json:"sha256"` // SHA-256 of all chunks together, lowercase hex
	Size   int64  `json:"size"`   // bytes in all chunks together
	Term   uint64 `json:"term"`   // the term of that entry
}

// NotLeaderReply is the body of status StatusNotLeader.
type NotLeaderReply struct {
	Error      string `json:"error"`
	LeaderAddr string `json:"leader_addr"` // the leader's client address, "" when unknown
}

// ErrorReply is the body of status StatusFailed.
type ErrorReply struct {
	Error string `json:"error"`
}

// Decode decodes a JSON body into out, saying which body failed.
func Decode(what string, body []byte, out any) error {
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s is not the expected JSON object: %w", what, err)
	}
	return nil
}
