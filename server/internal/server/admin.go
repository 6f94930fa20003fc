package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/internal/adminwire"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
	"github.com/ticketing-io/ticketing/server/internal/node"
)

const adminTimeout = 30 * time.Second

// memberAddWait bounds how long members.add waits for the new learner's
// promotion before it answers that it is still a learner: well within a
// client's answer grace (DefaultAnswerGrace), so the answer is never lost
// to a client that gave up. ticketctl repeats the request to wait longer.
const memberAddWait = 5 * time.Second

// Status is this node's view of the cluster, the answer to the status op.
type Status = adminwire.Status

// MemberStatus is one server in a status answer.
type MemberStatus = adminwire.Member

// decodeAdmin decodes the body of a J request.
func decodeAdmin(body []byte) (adminwire.Request, error) {
	var req adminwire.Request
	err := adminwire.Decode("the admin request", body, &req)
	return req, err
}

// adminSnapshot answers snapshot.save: the stream from the leader, as
// documented (a follower's state may lag), else "not the leader".
func (s *Server) adminSnapshot(c *conn, id uint32) {
	if s.node.Raft().State() != raft.Leader {
		adminAnswer(c, id, adminwire.StatusNotLeader, s.notLeaderReply())
		return
	}
	s.sendSnapshot(c, id)
}

func adminFailure(err error) (uint16, any) {
	return adminwire.StatusFailed, adminwire.ErrorReply{Error: err.Error()}
}

// adminAnswer sends the final V of request id. Membership changes wait for
// commits: admin requests run on their own goroutine (conn.go).
func adminAnswer(c *conn, id uint32, code uint16, body any) {
	// The bodies are adminwire types of strings and numbers: encoding them
	// cannot fail.
	data, err := json.Marshal(body)
	if err != nil {
		panic(fmt.Sprintf("encoding an admin answer: %v", err))
	}
	c.finish(id, &wire.Frame{Type: wire.TypeAdminReply, ID: id, Code: code, Text: data})
}

func (s *Server) notLeaderReply() adminwire.NotLeaderReply {
	return adminwire.NotLeaderReply{Error: "this server is not the leader", LeaderAddr: s.leaderClientAddr()}
}

func (s *Server) adminDo(req adminwire.Request) (uint16, any) {
	if req.Op == adminwire.OpStatus {
		return adminwire.StatusOK, s.Status()
	}
	r := s.node.Raft()
	if r.State() != raft.Leader {
		return adminwire.StatusNotLeader, s.notLeaderReply()
	}
	fail := adminFailure
	switch req.Op {
	case adminwire.OpMembersAdd:
		if req.ID == "" || req.RaftAddr == "" {
			return fail(fmt.Errorf("members.add needs id and raft_addr"))
		}
		// The server there must be the one named, waiting with an empty
		// data directory: not a typo, not another cluster's member, not a
		// member that lost its data. It joins as a learner; the answer
		// comes once it is a voter, or after memberAddWait.
		j, err := s.node.AddMember(req.ID, req.RaftAddr, memberAddWait)
		if err != nil {
			return fail(err)
		}
		s.log.Info("member added", "id", req.ID, "raft_addr", req.RaftAddr, "voter", j.Voter, "learner_index", j.LearnerIndex, "promoted_index", j.PromotedIndex)
		return adminwire.StatusOK, adminwire.MemberAdded{Learner: !j.Voter, LearnerIndex: j.LearnerIndex, PromotedIndex: j.PromotedIndex, MatchIndex: j.Match, CommitIndex: j.Commit}
	case adminwire.OpMembersRemove:
		if req.ID == "" {
			return fail(fmt.Errorf("members.remove needs id"))
		}
		if !s.isMember(req.ID) {
			return fail(fmt.Errorf("no member with id %q", req.ID))
		}
		if err := s.node.CheckRemove(req.ID); err != nil {
			return fail(err)
		}
		if err := r.RemoveServer(raft.ServerID(req.ID), 0, adminTimeout).Error(); err != nil {
			return fail(fmt.Errorf("remove %s: %w", req.ID, err))
		}
		if err := s.node.Forget(req.ID); err != nil {
			s.log.Warn("member removed, but not yet dropped from the participants", "id", req.ID, "err", err)
		}
		s.log.Info("member removed", "id", req.ID)
		return adminwire.StatusOK, struct{}{}
	case adminwire.OpLeaderTransfer:
		var f raft.Future
		if req.ID == "" {
			f = r.LeadershipTransfer()
		} else {
			addr := s.memberRaftAddr(req.ID)
			if addr == "" {
				return fail(fmt.Errorf("no member with id %q", req.ID))
			}
			if !s.isVoter(req.ID) {
				return fail(fmt.Errorf("leadership transfer: %s is a learner, catching up before its promotion to voter, and only a voter leads: wait until ticketctl status shows it a voter", req.ID))
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
		return adminwire.StatusOK, adminwire.TransferReply{LeaderID: string(lid)}
	}
	return fail(fmt.Errorf("unknown admin op %q", req.Op))
}

// sendSnapshot streams a fresh snapshot in V status-StatusChunk frames of
// at most adminwire.SnapshotChunk bytes; the final V (status 0) carries the
// snapshot's metadata.
func (s *Server) sendSnapshot(c *conn, id uint32) {
	fail := func(err error) { adminAnswer(c, id, adminwire.StatusFailed, adminwire.ErrorReply{Error: err.Error()}) }
	meta, rc, err := s.node.OpenSnapshot()
	if err != nil {
		fail(err)
		return
	}
	defer func() { _ = rc.Close() }()
	h := sha256.New()
	buf := make([]byte, adminwire.SnapshotChunk)
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
			if !c.send(&wire.Frame{Type: wire.TypeAdminReply, ID: id, Code: adminwire.StatusChunk, Text: buf[:n]}) {
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
	adminAnswer(c, id, adminwire.StatusOK, adminwire.SnapshotMeta{Index: meta.Index, Term: meta.Term, Size: size, SHA256: hex.EncodeToString(h.Sum(nil))})
}

func (s *Server) isMember(id string) bool { return s.memberRaftAddr(id) != "" }

func (s *Server) isVoter(id string) bool {
	f := s.node.Raft().GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, m := range f.Configuration().Servers {
		if string(m.ID) == id {
			return m.Suffrage == raft.Voter
		}
	}
	return false
}

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
		CommitIndex: r.CommitIndex(), AppliedIndex: r.AppliedIndex(), Held: s.node.Held(), Version: s.cfg.Build.Version}
	st.Term, _ = strconv.ParseUint(r.Stats()["term"], 10, 64)
	st.ClusterID = node.FormatClusterID(s.node.Cluster())
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
			ms := MemberStatus{ID: string(m.ID), RaftAddr: string(m.Address),
				ClientAddr: addrs[string(m.ID)], Voter: m.Suffrage == raft.Voter, Leader: m.ID == lid}
			if string(m.ID) != s.cfg.NodeID {
				if match, reachable, ok := s.node.Progress(string(m.ID)); ok {
					ms.MatchIndex, ms.Reachable = match, &reachable
				}
			}
			st.Members = append(st.Members, ms)
		}
	}
	return st
}

// adminAs authorizes and runs one admin request (registered with begin) on
// its own goroutine, auditing and counting it with its outcome. status is
// open to the admin and monitor roles, everything else to admin only.
func (s *Server) adminAs(c *conn, id uint32, body []byte) {
	// A body that does not decode is refused (status 2) once the principal
	// is authorized; its op, if one was read, still labels the audit.
	req, derr := decodeAdmin(body)
	op := req.Op
	if op == "" {
		op = "unknown"
	}
	label := op
	switch op {
	case adminwire.OpStatus, adminwire.OpMembersAdd, adminwire.OpMembersRemove, adminwire.OpLeaderTransfer, adminwire.OpSnapshotSave, adminwire.OpConsole:
	default:
		label = "other" // bounded metric labels
	}
	p := c.lookup()
	if p == nil || !(p.role == RoleAdmin || p.role == RoleMonitor && (op == adminwire.OpStatus || op == adminwire.OpConsole)) {
		s.metrics.adminOps.WithLabelValues(label, "denied").Inc()
		// The requested op is the client's text: the metric and the
		// limiter see only the closed label, the record a bounded copy.
		c.refuse(id, "admin "+label, "", wire.ForbiddenRole, slog.String("requested_op", auditText(op)))
		return
	}
	attrs := []slog.Attr{slog.String("principal", p.name), slog.String("op", "admin "+auditText(op)), slog.String("remote", c.nc.RemoteAddr().String())}
	if req.ID != "" {
		attrs = append(attrs, slog.String("member", auditText(req.ID)))
	}
	if derr == nil && op == adminwire.OpSnapshotSave {
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "audit", append(attrs, slog.String("outcome", "started"))...)
		s.adminSnapshot(c, id) // streams; the snapshot's own errors reach the client
		s.metrics.adminOps.WithLabelValues(label, "done").Inc()
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "audit", append(attrs, slog.String("outcome", "done"))...)
		return
	}
	if derr == nil && op == adminwire.OpConsole {
		outcome := s.adminConsole(c, id, req) // console.go: a read, streamed
		s.metrics.adminOps.WithLabelValues(label, outcome).Inc()
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "audit", append(attrs, slog.String("outcome", outcome))...)
		return
	}
	var code uint16
	var out any
	if derr != nil {
		code, out = adminFailure(derr)
	} else {
		code, out = s.adminDo(req)
	}
	// Recorded before the answer goes out: whoever sees the answer can
	// rely on the record existing.
	outcome := map[uint16]string{adminwire.StatusOK: "ok", adminwire.StatusNotLeader: "not_leader", adminwire.StatusFailed: "failed"}[code]
	s.metrics.adminOps.WithLabelValues(label, outcome).Inc()
	// Changes to the cluster are always recorded; status (a monitor polls
	// it) and unknown ops within the log's rate limit.
	changes := label != adminwire.OpStatus && label != "other"
	if changes || s.logLimit.allow(logKey{what: "admin " + label, who: p.name, reason: outcome}) {
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "audit", append(attrs, slog.String("outcome", outcome))...)
	}
	adminAnswer(c, id, code, out)
}
