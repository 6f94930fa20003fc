package ticketing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// Admin is an administrative session with one specific node (hello flag
// admin), for tools such as ticketctl. Any node serves Status; membership
// changes and leader transfer need the leader, and a follower answers them
// with a *NotLeaderError carrying the leader's address. An Admin does not
// reconnect: when its connection is lost, calls return ErrUnavailable and
// the caller dials again. It is safe for concurrent use.
type Admin struct {
	addr string
	c    *conn
	wg   sync.WaitGroup
	once sync.Once
}

// Status is a node's own view of the cluster (admin op "status").
type Status struct {
	NodeID       string   `json:"node_id"`
	Role         string   `json:"role"` // leader, follower, candidate
	LeaderID     string   `json:"leader_id"`
	LeaderAddr   string   `json:"leader_addr"`
	Term         uint64   `json:"term"`
	CommitIndex  uint64   `json:"commit_index"`
	AppliedIndex uint64   `json:"applied_index"`
	LastToken    uint64   `json:"last_token"`
	Held         int      `json:"held"`
	Members      []Member `json:"members"`
}

// Member is one server of the cluster configuration.
type Member struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	ClientAddr string `json:"client_addr"`
	Voter      bool   `json:"voter"`
	Leader     bool   `json:"leader"`
}

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
	a := &Admin{addr: addrs[0]}
	c, err := dial(ctx, a.addr, cfg, wire.HelloAdmin, nil, &a.wg)
	if err != nil {
		err = unwrapHello(err)
		kinds := []error{ErrUnavailable}
		switch {
		case errors.Is(err, ErrUnauthenticated):
			kinds = []error{ErrUnauthenticated}
		case errors.Is(err, ErrCapacity):
			kinds = []error{ErrCapacity}
		case ctx.Err() != nil:
			kinds = append(kinds, ctx.Err())
		}
		return nil, newOpError("admin", "", false, err, "cannot open an admin session with "+a.addr, kinds...)
	}
	a.c = c
	return a, nil
}

func unwrapHello(err error) error {
	var he *helloError
	if errors.As(err, &he) {
		return he.err
	}
	return err
}

// Addr is the node's address.
func (a *Admin) Addr() string { return a.addr }

// NodeID is the node id the server sent in its hello answer.
func (a *Admin) NodeID() string { return a.c.nodeID }

// Close ends the session.
func (a *Admin) Close() error {
	a.once.Do(func() { a.c.fail(&connFailure{kind: failClosed, addr: a.addr}) })
	a.wg.Wait()
	return nil
}

// do sends one J request and decodes a status-0 answer into out.
func (a *Admin) do(ctx context.Context, req map[string]any, out any) error {
	op := req["op"].(string)
	name := "admin " + op
	body, err := json.Marshal(req)
	if err != nil {
		return newOpError(name, "", false, err, "cannot encode the request", ErrInvalidArgument)
	}
	cl := newCall(wire.TypeAdmin, "")
	f := wire.Frame{Type: wire.TypeAdmin, Text: body}
	if err := a.c.start(ctx, cl, &f); err != nil {
		if err == errConnGone {
			fl := a.c.failureCause()
			kind := ErrUnavailable
			if fl.closed() {
				kind = ErrClosed
			}
			return newOpError(name, "", false, fl.cause, "not sent: "+fl.what(), kind)
		}
		return newOpError(name, "", false, nil, "not sent: no free request slot before "+err.Error(), err)
	}
	ans, err := waitAnswer(ctx, a.c, cl, name, "")
	if err != nil {
		return err
	}
	switch ans.f.Code {
	case 0:
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(ans.f.Text, out); err != nil {
			return newOpError(name, "", false, err, fmt.Sprintf("the node %s answered with JSON that does not decode", a.addr))
		}
		return nil
	case 1:
		var nl struct {
			LeaderAddr string `json:"leader_addr"`
		}
		json.Unmarshal(ans.f.Text, &nl)
		e := &NotLeaderError{Addr: a.addr, LeaderAddr: nl.LeaderAddr}
		return newOpError(name, "", false, e, strings.TrimPrefix(e.Error(), "ticketing: "), ErrNotLeader)
	default:
		var fe struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(ans.f.Text, &fe) != nil || fe.Error == "" {
			fe.Error = string(ans.f.Text)
		}
		e := &AdminError{Addr: a.addr, Op: op, Message: fe.Error}
		return newOpError(name, "", false, e, fmt.Sprintf("the node %s answered status %d: %s", a.addr, ans.f.Code, fe.Error))
	}
}

// Status asks the node for its view of the cluster.
func (a *Admin) Status(ctx context.Context) (Status, error) {
	var s Status
	err := a.do(ctx, map[string]any{"op": "status"}, &s)
	return s, err
}

// AddMember adds a voter with the given id and raft address (leader only);
// it returns once the configuration change is committed.
func (a *Admin) AddMember(ctx context.Context, id, raftAddr string) error {
	return a.do(ctx, map[string]any{"op": "members.add", "id": id, "raft_addr": raftAddr}, nil)
}

// RemoveMember removes the server with the given id (leader only).
func (a *Admin) RemoveMember(ctx context.Context, id string) error {
	return a.do(ctx, map[string]any{"op": "members.remove", "id": id}, nil)
}

// TransferLeader hands leadership to the voter id ("" for any voter) and
// returns the new leader's id (leader only).
func (a *Admin) TransferLeader(ctx context.Context, id string) (string, error) {
	req := map[string]any{"op": "leader.transfer"}
	if id != "" {
		req["id"] = id
	}
	var out struct {
		LeaderID string `json:"leader_id"`
	}
	err := a.do(ctx, req, &out)
	return out.LeaderID, err
}
