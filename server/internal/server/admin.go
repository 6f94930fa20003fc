package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
	"github.com/ticketing-io/ticketing/server/internal/node"
)

// Admin answer statuses carried by V frames.
const (
	adminOK        = 0
	adminNotLeader = 1
	adminFailed    = 2
)

const adminTimeout = 30 * time.Second

type adminRequest struct {
	Op       string `json:"op"`
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
}

// MemberStatus is one server in a status answer.
type MemberStatus struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	ClientAddr string `json:"client_addr,omitempty"`
	Voter      bool   `json:"voter"`
	Leader     bool   `json:"leader"`
}

// Status is the answer to the status op: this node's view of the cluster.
type Status struct {
	NodeID       string `json:"node_id"`
	Role         string `json:"role"`
	LeaderID     string `json:"leader_id"`
	LeaderAddr   string `json:"leader_addr"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	LastToken    uint64 `json:"last_token"`
	Held         int    `json:"held"`
	Cluster      string `json:"cluster_id"`
	// Participants are the servers recorded as holding this cluster's
	// state: one of them that shows up empty is refused (it lost data).
	Participants []string       `json:"participants"`
	Members      []MemberStatus `json:"members"`
}

// admin runs one admin request on its own goroutine (membership changes wait
// for commits) and answers with V.
func (s *Server) admin(c *conn, id uint32, body []byte) {
	var req adminRequest
	if json.Unmarshal(body, &req) == nil && req.Op == "snapshot.save" {
		// Taken on the leader, as documented: a follower's state may lag.
		if s.node.Raft().State() != raft.Leader {
			data, _ := json.Marshal(map[string]string{"error": "this server is not the leader", "leader_addr": s.leaderClientAddr()})
			c.finish(id, &wire.Frame{Type: wire.TypeAdminReply, ID: id, Code: adminNotLeader, Text: data})
			return
		}
		s.sendSnapshot(c, id)
		return
	}
	code, out := s.adminDo(body)
	data, _ := json.Marshal(out)
	c.finish(id, &wire.Frame{Type: wire.TypeAdminReply, ID: id, Code: uint16(code), Text: data})
}

func (s *Server) adminDo(body []byte) (int, any) {
	var req adminRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return adminFailed, map[string]string{"error": "admin request is not a JSON object: " + err.Error()}
	}
	if req.Op == "status" {
		return adminOK, s.Status()
	}
	r := s.node.Raft()
	if r.State() != raft.Leader {
		return adminNotLeader, map[string]string{"error": "this server is not the leader", "leader_addr": s.leaderClientAddr()}
	}
	fail := func(err error) (int, any) { return adminFailed, map[string]string{"error": err.Error()} }
	switch req.Op {
	case "members.add":
		if req.ID == "" || req.RaftAddr == "" {
			return fail(fmt.Errorf("members.add needs id and raft_addr"))
		}
		// The server there must be the one named, waiting with an empty
		// data directory: not a typo, not another cluster's member, not a
		// member that lost its data.
		if err := s.node.PrepareJoin(req.ID, req.RaftAddr); err != nil {
			return fail(err)
		}
		if err := r.AddVoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr), 0, adminTimeout).Error(); err != nil {
			return fail(fmt.Errorf("add %s at %s: %w", req.ID, req.RaftAddr, err))
		}
		s.log.Info("member added", "id", req.ID, "raft_addr", req.RaftAddr)
		return adminOK, map[string]string{}
	case "members.remove":
		if req.ID == "" {
			return fail(fmt.Errorf("members.remove needs id"))
		}
		if !s.isMember(req.ID) {
			return fail(fmt.Errorf("no member with id %q", req.ID))
		}
		if err := r.RemoveServer(raft.ServerID(req.ID), 0, adminTimeout).Error(); err != nil {
			return fail(fmt.Errorf("remove %s: %w", req.ID, err))
		}
		if err := s.node.Forget(req.ID); err != nil {
			s.log.Warn("member removed, but not yet dropped from the participants", "id", req.ID, "err", err)
		}
		s.log.Info("member removed", "id", req.ID)
		return adminOK, map[string]string{}
	case "leader.transfer":
		var f raft.Future
		if req.ID == "" {
			f = r.LeadershipTransfer()
		} else {
			addr := s.memberRaftAddr(req.ID)
			if addr == "" {
				return fail(fmt.Errorf("no member with id %q", req.ID))
			}
			s.transferTo.Store(&req.ID)
			f = r.LeadershipTransferToServer(raft.ServerID(req.ID), raft.ServerAddress(addr))
		}
		if err := f.Error(); err != nil {
			s.transferTo.Store(nil)
			return fail(fmt.Errorf("leadership transfer: %w", err))
		}
		// The transfer is done when the target has won its election; this
		// server learns that from the new leader's first heartbeat. Success
		// is reported only for a move that happened, to the voter asked for.
		var lid raft.ServerID
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, lid = r.LeaderWithID(); lid != "" && string(lid) != s.cfg.NodeID && r.State() != raft.Leader {
				break
			}
		}
		switch {
		case lid == "" || string(lid) == s.cfg.NodeID || r.State() == raft.Leader:
			return fail(fmt.Errorf("leadership transfer: leadership did not move within 5 s (the leader is %q); see ticketctl status", string(lid)))
		case req.ID != "" && string(lid) != req.ID:
			return fail(fmt.Errorf("leadership transfer: leadership moved to %s, not to %s as asked", lid, req.ID))
		}
		return adminOK, map[string]string{"leader_id": string(lid)}
	}
	return fail(fmt.Errorf("unknown admin op %q", req.Op))
}

// adminChunk is the V status of one piece of a streamed snapshot; the final
// V (status 0) carries the snapshot's metadata.
const adminChunk = 3

// sendSnapshot streams a fresh snapshot in V frames of at most 60 KiB.
func (s *Server) sendSnapshot(c *conn, id uint32) {
	fail := func(err error) {
		data, _ := json.Marshal(map[string]string{"error": err.Error()})
		c.finish(id, &wire.Frame{Type: wire.TypeAdminReply, ID: id, Code: adminFailed, Text: data})
	}
	meta, rc, err := s.node.OpenSnapshot()
	if err != nil {
		fail(err)
		return
	}
	defer rc.Close()
	h := sha256.New()
	buf := make([]byte, 60<<10)
	var size int64
	for {
		n, err := io.ReadFull(rc, buf)
		if n > 0 {
			h.Write(buf[:n])
			size += int64(n)
			// Wait while the client drains, rather than buffering the whole snapshot.
			for c.pending() > 1<<20 {
				if c.isClosing() {
					return
				}
				time.Sleep(time.Millisecond)
			}
			if !c.send(&wire.Frame{Type: wire.TypeAdminReply, ID: id, Code: adminChunk, Text: buf[:n]}) {
				return
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			fail(err)
			return
		}
	}
	data, _ := json.Marshal(map[string]any{"index": meta.Index, "term": meta.Term, "size": size, "sha256": hex.EncodeToString(h.Sum(nil))})
	c.finish(id, &wire.Frame{Type: wire.TypeAdminReply, ID: id, Code: adminOK, Text: data})
}

func (s *Server) isMember(id string) bool { return s.memberRaftAddr(id) != "" }

func (s *Server) memberRaftAddr(id string) string {
	f := s.node.Raft().GetConfiguration()
	if f.Error() != nil {
		return ""
	}
	for _, m := range f.Configuration().Servers {
		if string(m.ID) == id {
			return string(m.Address)
		}
	}
	return ""
}

// Status returns this server's view of the cluster.
func (s *Server) Status() Status {
	r := s.node.Raft()
	_, lid := r.LeaderWithID()
	st := Status{NodeID: s.cfg.NodeID, Role: roleName(r.State()), LeaderID: string(lid),
		CommitIndex: r.CommitIndex(), AppliedIndex: r.AppliedIndex(), Held: s.node.Held()}
	st.Term, _ = strconv.ParseUint(r.Stats()["term"], 10, 64)
	st.Cluster = node.FormatClusterID(s.node.Cluster())
	addrs := map[string]string{}
	s.node.Read(func(fs *fsm.State) {
		st.LastToken = fs.LastToken()
		st.Participants = fs.Participants()
		for _, m := range fs.Members() {
			addrs[m[0]] = m[1]
		}
	})
	st.LeaderAddr = addrs[string(lid)]
	if f := r.GetConfiguration(); f.Error() == nil {
		for _, m := range f.Configuration().Servers {
			st.Members = append(st.Members, MemberStatus{ID: string(m.ID), RaftAddr: string(m.Address),
				ClientAddr: addrs[string(m.ID)], Voter: m.Suffrage == raft.Voter, Leader: m.ID == lid})
		}
	}
	return st
}
