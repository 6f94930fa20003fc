package ticketing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/ticketing-io/ticketing/internal/adminwire"
	"github.com/ticketing-io/ticketing/internal/transport"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// Admin is an administrative session with one specific node (hello flag
// admin), for tools such as ticketctl. Any node serves Status; membership
// changes and leader transfer need the leader, and a follower answers them
// with a *NotLeaderError carrying the leader's address. Any node also saves
// a snapshot of its state (SaveSnapshot), for backups. An Admin does not
// reconnect: when its connection is lost, calls return ErrUnavailable and
// the caller dials again. It is safe for concurrent use.
type Admin struct {
	addr string
	pin  *transport.Pin // the node's cluster, checked and recorded at the hello
	c    *transport.Conn
	wg   sync.WaitGroup
	once sync.Once
}

// Status is a node's own view of the cluster (admin op "status"): its
// node id, role ("leader", "follower" or "candidate"), the leader it knows,
// Raft term and indexes, the last token issued, the tickets held, the
// cluster ID with its participants, and the Members of the configuration.
// docs/protocol.md (Admin requests) describes each field.
type Status = adminwire.Status

// Member is one server of the cluster configuration; its ClientAddr is ""
// for a member that never led.
type Member = adminwire.Member

// DialAdmin opens an admin session to the node at addr (one node, no
// failover). Of the options, WithToken, WithTLS and WithDialTimeout apply.
func DialAdmin(ctx context.Context, addr string, opts ...Option) (*Admin, error) {
	addrs, err := parseAddrs(addr)
	if err != nil {
		return nil, err
	}
	if len(addrs) != 1 {
		return nil, configError(nil, "DialAdmin takes one address, got %d", len(addrs))
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	a := &Admin{addr: addrs[0], pin: cfg.Pin}
	c, err := transport.Dial(ctx, a.addr, &cfg.Config, wire.HelloAdmin, &a.wg)
	if err != nil {
		err = unwrapHello(err)
		kinds := []error{ErrUnavailable}
		switch {
		case errors.Is(err, ErrUnauthenticated):
			kinds = []error{ErrUnauthenticated}
		case errors.Is(err, ErrCapacity):
			kinds = []error{ErrCapacity}
		case errors.Is(err, ErrWrongCluster):
			kinds = []error{ErrWrongCluster, ErrUnavailable}
		case ctx.Err() != nil:
			kinds = append(kinds, ctx.Err())
		}
		return nil, newOpError("admin", "", false, err, "cannot open an admin session with "+a.addr, kinds...)
	}
	a.c = c
	return a, nil
}

func unwrapHello(err error) error { return transport.HelloRefusal(err) }

// Addr is the node's address.
func (a *Admin) Addr() string { return a.addr }

// NodeID is the node id the server sent in its hello answer.
func (a *Admin) NodeID() string { return a.c.NodeID() }

// Close ends the session.
func (a *Admin) Close() error {
	a.once.Do(a.c.End)
	a.wg.Wait()
	return nil
}

// do sends one J request and decodes a status-0 answer into out. effect
// marks operations that change the cluster: when their answer is lost they
// are ErrIndeterminate (they may have been applied), never ErrUnavailable,
// so that nobody repeats them elsewhere blindly.
func (a *Admin) do(ctx context.Context, req adminwire.Request, out any, effect bool) error {
	op := req.Op
	name := "admin " + op
	cl := transport.NewRequest(wire.TypeAdmin, "")
	if err := a.send(ctx, cl, name, req); err != nil {
		return err
	}
	ans, err := waitAnswer(ctx, a.c, cl, name, "", effect)
	if err != nil {
		return err
	}
	return a.reply(name, op, &ans.F, out)
}

// send registers cl and queues the J request req for it.
func (a *Admin) send(ctx context.Context, cl *transport.Request, name string, req adminwire.Request) error {
	body, err := json.Marshal(req)
	if err != nil {
		return newOpError(name, "", false, err, "cannot encode the request", ErrInvalidArgument)
	}
	f := wire.Frame{Type: wire.TypeAdmin, Text: body}
	if err := a.c.Start(ctx, cl, &f); err != nil {
		if err == transport.ErrConnGone {
			fl := a.c.Ended()
			kind := ErrUnavailable
			if fl.Closed() {
				kind = ErrClosed
			}
			return newOpError(name, "", false, fl.Cause, "not sent: "+fl.What(), kind)
		}
		return newOpError(name, "", false, nil, "not sent: no free request slot before "+err.Error(), err)
	}
	return nil
}

// reply decodes a V answer: status 0 into out (when not nil), 1 (not the
// leader) as *NotLeaderError, any other as *AdminError. A body that does not
// decode is reported with the status's own kind and the decode error as
// the cause.
func (a *Admin) reply(name, op string, f *wire.Frame, out any) error {
	switch f.Code {
	case adminwire.StatusOK:
		if out == nil {
			return nil
		}
		if err := adminwire.Decode("the answer", f.Text, out); err != nil {
			return newOpError(name, "", false, err, fmt.Sprintf("the node %s answered with JSON that does not decode", a.addr))
		}
		return nil
	case adminwire.StatusNotLeader:
		var nl adminwire.NotLeaderReply
		if err := adminwire.Decode("the not-the-leader answer", f.Text, &nl); err != nil {
			// Still a *NotLeaderError (without the leader's address), so
			// that a tool moves on to the next node; the decode error is
			// kept beside it.
			e := newOpError(name, "", false, errors.Join(&NotLeaderError{Addr: a.addr}, err),
				fmt.Sprintf("the node %s answered that it is not the leader, in JSON that does not decode, so the leader's address is unknown (%v)", a.addr, err), ErrNotLeader)
			e.Hide = true
			return e
		}
		e := &NotLeaderError{Addr: a.addr, LeaderAddr: nl.LeaderAddr}
		return newOpError(name, "", false, e, detailOf(e), ErrNotLeader)
	default:
		var fe adminwire.ErrorReply
		msg := string(f.Text)
		if err := adminwire.Decode("the failure answer", f.Text, &fe); err == nil && fe.Error != "" {
			msg = fe.Error
		}
		// A body that is not the documented JSON is still the node's own
		// words: shown as they are.
		e := &AdminError{Addr: a.addr, Op: op, Message: msg}
		return newOpError(name, "", false, e, fmt.Sprintf("the node %s answered status %d: %s", a.addr, f.Code, msg))
	}
}

// Status asks the node for its view of the cluster.
func (a *Admin) Status(ctx context.Context) (Status, error) {
	var s Status
	err := a.do(ctx, adminwire.Request{Op: adminwire.OpStatus}, &s, false)
	return s, err
}

// MemberAdded is the answer to AddMember: whether the server is still a
// learner, the Raft indexes of the configurations that made it a learner and a
// voter, and how far its log has come (MatchIndex of the leader's
// CommitIndex). docs/protocol.md (Admin requests) describes each field.
type MemberAdded = adminwire.MemberAdded

// AddMember adds the server with the given id and raft address (leader
// only): as a learner, which receives the log but counts towards no
// majority, promoted to voter by the leader once it has caught up. It
// returns once the server is a voter, or after a few seconds with Learner
// true while it is still catching up; calling it again is safe (it adds
// nothing twice) and waits again. If the answer is lost after the request
// was sent (the connection ended, no answer within DefaultAnswerGrace, ctx
// ended) the error matches ErrIndeterminate: the change may have been
// applied; call AddMember again, or check Status.
func (a *Admin) AddMember(ctx context.Context, id, raftAddr string) (MemberAdded, error) {
	var out MemberAdded
	err := a.do(ctx, adminwire.Request{Op: adminwire.OpMembersAdd, ID: id, RaftAddr: raftAddr}, &out, true)
	return out, err
}

// RemoveMember removes the server with the given id (leader only). A lost
// answer is ErrIndeterminate, as for AddMember.
func (a *Admin) RemoveMember(ctx context.Context, id string) error {
	return a.do(ctx, adminwire.Request{Op: adminwire.OpMembersRemove, ID: id}, nil, true)
}

// TransferLeader hands leadership to the voter id ("" for any voter) and
// returns the new leader's id (leader only). A lost answer is
// ErrIndeterminate, as for AddMember: leadership may have moved.
func (a *Admin) TransferLeader(ctx context.Context, id string) (string, error) {
	var out adminwire.TransferReply
	err := a.do(ctx, adminwire.Request{Op: adminwire.OpLeaderTransfer, ID: id}, &out, true)
	return out.LeaderID, err
}

// SnapshotInfo describes a snapshot written by SaveSnapshot.
// (The node's own report, checked against it, is adminwire.SnapshotMeta.)
type SnapshotInfo struct {
	Index  uint64 `json:"index"`  // the last Raft log index the snapshot includes
	Term   uint64 `json:"term"`   // the term of that entry
	Size   int64  `json:"size"`   // bytes written to w
	SHA256 string `json:"sha256"` // SHA-256 of those bytes, lowercase hex
}

// snapshotBuffer is how many pieces of a snapshot (up to 60 KiB each) may
// wait between the connection and SaveSnapshot's writer.
const snapshotBuffer = 16

// SaveSnapshot asks the node for a snapshot of its state, taken now (admin
// op "snapshot.save"), and writes it to w as it arrives. It returns once the
// whole snapshot has arrived and its size and SHA-256 match what the node
// reports at the end; a mismatch, an incomplete stream, a write error or the
// end of ctx is an error. On error w may hold part of a snapshot: write to a
// temporary file and keep it only when SaveSnapshot succeeds (ticketctl
// snapshot save does). The file restores with "ticketd --restore FILE".
//
// Only the leader serves it (a follower's state may lag): a follower
// answers "not the leader", reported as for the other admin calls
// (*NotLeaderError, naming the leader's address; ticketctl finds the leader
// through Status), and a node that fails as *AdminError.
//
// The node sends the snapshot as fast as SaveSnapshot consumes it. While w
// blocks, the session reads nothing: other calls on the Admin wait too, and
// a w that blocks for longer than the server's ping timeout (two ping
// intervals, 10 s by default) loses the session.
func (a *Admin) SaveSnapshot(ctx context.Context, w io.Writer) (SnapshotInfo, error) {
	const op = adminwire.OpSnapshotSave
	name := "admin " + op
	cl := transport.NewRequest(wire.TypeAdmin, "")
	cl.Chunks = make(chan []byte, snapshotBuffer)
	cl.Gone = make(chan struct{})
	defer close(cl.Gone)
	if err := a.send(ctx, cl, name, adminwire.Request{Op: op}); err != nil {
		return SnapshotInfo{}, err
	}
	h := sha256.New()
	var size int64
	var werr error
	write := func(p []byte) {
		if werr != nil {
			return
		}
		if _, err := w.Write(p); err != nil {
			werr = err
			return
		}
		h.Write(p)
		size += int64(len(p))
	}
	writeFailed := func() error {
		return newOpError(name, "", false, werr, fmt.Sprintf("writing the snapshot failed after %d bytes", size))
	}
	var ans *transport.Answer
	// The server may not go quiet for longer than answerGrace between pieces.
	idle := time.NewTimer(a.c.AnswerGrace())
	defer idle.Stop()
	for ans == nil {
		select {
		case p := <-cl.Chunks:
			if write(p); werr != nil {
				a.c.Abandon(cl) // the rest of the stream is read and dropped
				return SnapshotInfo{}, writeFailed()
			}
			idle.Reset(a.c.AnswerGrace())
		case <-idle.C:
			if ans = a.c.Abandon(cl); ans == nil {
				return SnapshotInfo{}, newOpError(name, "", false, nil,
					fmt.Sprintf("incomplete: %s sent nothing for %v after %d bytes although the connection is alive", a.addr, a.c.AnswerGrace(), size), ErrUnavailable)
			}
		case got := <-cl.Res:
			ans = &got
		case <-ctx.Done():
			if ans = a.c.Abandon(cl); ans == nil {
				return SnapshotInfo{}, newOpError(name, "", false, nil,
					fmt.Sprintf("incomplete: %v after %d bytes from %s", ctx.Err(), size, a.addr), ctx.Err())
			}
		}
	}
	// Every piece was queued before the final answer: write the rest.
	for more := true; more; {
		select {
		case p := <-cl.Chunks:
			write(p)
		default:
			more = false
		}
	}
	if werr != nil {
		return SnapshotInfo{}, writeFailed()
	}
	if ans.Fail != nil {
		kind := ErrUnavailable
		if ans.Fail.Closed() {
			kind = ErrClosed
		}
		e := newOpError(name, "", false, ans.Fail.Cause, fmt.Sprintf("incomplete after %d bytes: %s", size, ans.Fail.What()), kind)
		e.Hide = ans.Fail.Explained()
		return SnapshotInfo{}, e
	}
	if err := answerError(a.c, ans, name, "", false); err != nil {
		return SnapshotInfo{}, err
	}
	var meta adminwire.SnapshotMeta
	if err := a.reply(name, op, &ans.F, &meta); err != nil {
		return SnapshotInfo{}, err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	switch {
	case meta.SHA256 == "":
		return SnapshotInfo{}, newOpError(name, "", false, nil,
			fmt.Sprintf("the node %s sent %d bytes but no SHA-256 to verify them against; the snapshot is not verified", a.addr, size))
	case meta.Size != size || !strings.EqualFold(meta.SHA256, sum):
		return SnapshotInfo{}, newOpError(name, "", false, nil,
			fmt.Sprintf("the snapshot from %s is corrupt: received %d bytes with SHA-256 %s, the node sent %d bytes with SHA-256 %s",
				a.addr, size, sum, meta.Size, meta.SHA256))
	}
	return SnapshotInfo{Index: meta.Index, Term: meta.Term, Size: size, SHA256: sum}, nil
}
