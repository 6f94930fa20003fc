package fsm

import (
	"fmt"

	"github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"
)

// owner is the part of the state an op kind changes; the dispatcher routes
// each op to its owner.
type owner uint8

const (
	ownerNone         owner = iota
	ownerTickets            // holds of keys (fsm.go)
	ownerCluster            // the cluster's identity and participants (fsm.go)
	ownerCoordination       // nodes, sessions and semaphores (package coordsm)
)

func (o owner) String() string {
	switch o {
	case ownerTickets:
		return "tickets"
	case ownerCluster:
		return "cluster"
	case ownerCoordination:
		return "coordination"
	}
	return "none"
}

// kindSpec is one registered op kind.
type kindSpec struct {
	kind  OpKind
	name  string
	owner owner
	doc   string // one sentence, listed in docs/design.md
}

// ticketKinds are the kinds this package applies itself.
var ticketKinds = []kindSpec{
	{OpAcquire, "acquire", ownerTickets, "Grants Key to Owner for LeaseMs if the key is free, under the next fencing token; the owner already holding it gets its hold back."},
	{OpRelease, "release", ownerTickets, "Ends the hold of Key if Token is its current token (and its Principal may)."},
	{OpExpire, "expire", ownerTickets, "Proposed by the leader: ends the hold of Key if Token is its current token and the batch time has reached its expiry."},
	{OpTakeover, "takeover", ownerTickets, "The first entry of every new leader: records its client address, restarts every lease in full and detaches every coordination session."},
	{OpReleaseOwner, "release owner", ownerTickets, "Ends the hold of Key if Owner is its current owner (a client whose acquire is indeterminate frees an orphaned grant)."},
	{OpSetCluster, "set cluster", ownerCluster, "Gives the cluster its ID and forgets every participant (the first leader of a cluster, a restore)."},
	{OpAdmit, "admit", ownerCluster, "Records NodeID, with its data-directory incarnation if known and the log index of its entry, as a participant that holds the cluster's log."},
	{OpForget, "forget", ownerCluster, "Drops NodeID from the participants."},
}

// kindFlags are the bits of an encoded kind byte that are flags, not kind
// (kindPrincipal, kindIncarnation): no kind may use them.
const kindFlags = kindPrincipal | kindIncarnation

// registry is every op kind, in kind order: the ticket and cluster kinds,
// then coordination's.
func registry() []kindSpec {
	out := append([]kindSpec(nil), ticketKinds...)
	for _, k := range coordsm.Kinds() {
		out = append(out, kindSpec{kind: OpKind(k.Kind), name: k.Name, owner: ownerCoordination, doc: k.Doc})
	}
	return out
}

// owners maps each kind to its owner; built once, refusing overlaps.
var owners = func() (m [256]owner) {
	for _, k := range registry() {
		if err := checkKind(m, k); err != nil {
			panic(err)
		}
		m[k.kind] = k.owner
	}
	return m
}()

// checkKind refuses a kind that is zero, uses a flag bit or is taken.
func checkKind(m [256]owner, k kindSpec) error {
	switch {
	case k.kind == 0 || byte(k.kind)&kindFlags != 0:
		return fmt.Errorf("fsm: op kind %d (%s) is 0 or uses a flag bit of the kind byte", k.kind, k.name)
	case m[k.kind] != ownerNone:
		return fmt.Errorf("fsm: op kind %d (%s of %s) is already taken by %s", k.kind, k.name, k.owner, m[k.kind])
	}
	return nil
}

func isCoordKind(k OpKind) bool { return owners[k] == ownerCoordination }
