package fsm

import (
	"sort"

	"github.com/google/btree"

	"github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"
)

// Owner identifies one acquire attempt (16 random bytes chosen by the client).
type Owner [16]byte

// OpKind is the kind of one operation in a Batch: its number is the op's
// kind byte in a log entry. Every kind is registered in kinds.go with the
// part of the state that owns it.
type OpKind uint8

const (
	// OpAcquire grants Key to Owner for LeaseMs if the key is free. If Owner
	// already holds the key, the existing grant is returned unchanged.
	OpAcquire OpKind = 1
	// OpRelease ends the hold of Key if Token is its current token.
	OpRelease OpKind = 2
	// OpExpire ends the hold of Key if Token is its current token and the
	// batch time has reached the hold's expiry. Proposed by the leader.
	OpExpire OpKind = 3
	// OpTakeover is the first entry of every new leader: it records the
	// leader's client address and restarts every remaining lease in full
	// (a new leader may extend leases, never shorten them).
	OpTakeover OpKind = 4
	// OpReleaseOwner ends the hold of Key if Owner is its current owner. A
	// client whose acquire is indeterminate knows the owner it sent but not
	// the token, and frees an orphaned grant with it.
	OpReleaseOwner OpKind = 5

	// Cluster identity.
	// OpSetCluster gives the cluster its ID (Cluster) and forgets every
	// participant: the first leader of a new cluster proposes it, and a
	// restore sets a new one.
	OpSetCluster OpKind = 16
	// OpAdmit records NodeID as a participant: a server that has held, or
	// is being sent, this cluster's log. A participant that later shows up
	// with an empty data directory has lost data the cluster counted on.
	// Incarnation, when not zero, is the participant's data-directory
	// incarnation: a participant without the cluster ID but with this
	// incarnation is the same directory lagging behind, not a wiped one.
	// The record keeps the log index of its entry (Batch.Index): of two
	// records of one node id, the later one is the later admission.
	OpAdmit OpKind = 17
	// OpForget drops NodeID from the participants (members add of a server
	// that was removed, or lost its data and is added back empty).
	OpForget OpKind = 18
)

// ClusterID identifies one cluster's history: created at bootstrap, new at
// every restore. The zero value means "none yet".
type ClusterID [16]byte

// Op is one operation. Only the fields of its Kind are used.
type Op struct {
	Kind    OpKind
	Key     string
	Owner   Owner
	Token   uint64
	LeaseMs uint32
	NodeID  string    // OpTakeover, OpAdmit, OpForget
	Addr    string    // OpTakeover: the leader's client address
	Cluster ClusterID // OpSetCluster
	// Incarnation (OpAdmit): the participant's data-directory incarnation,
	// 0 if unknown (an older ticketd).
	Incarnation uint64
	// Principal names who asks (OpAcquire, OpRelease, OpReleaseOwner). An
	// acquire records it in the hold; a release with a Principal ends only a
	// hold granted to that principal (or one recorded without a principal).
	// Empty means unrestricted: no principals configured, an admin, or the
	// leader itself.
	Principal string

	Coord *coordsm.Op // coordination kinds (package coordsm)
}

// Batch is the content of one Raft log entry: operations applied in order at
// one leader-stamped time (Unix milliseconds).
type Batch struct {
	Time int64
	Ops  []Op
	// Index is the Raft log index of the entry, set by whoever applies it
	// (not encoded: the log stores it beside the batch); 0 if unknown. An
	// admission records it.
	Index uint64
}

// Status is the outcome of one Op.
type Status uint8

const (
	Granted  Status = 1 // OpAcquire: granted now (Hold is the new hold)
	Existing Status = 2 // OpAcquire: Owner already held the key (Hold is that hold)
	Busy     Status = 3 // OpAcquire: held by another owner
	Released Status = 4 // OpRelease, OpExpire, OpReleaseOwner: the hold ended
	NotHeld  Status = 5 // OpRelease, OpExpire, OpReleaseOwner: the token (owner) is not the current holder, or not yet expired
	Done     Status = 6 // OpTakeover
	Invalid  Status = 7 // an op that cannot be applied (unknown kind, lease 0); state unchanged
	// Forbidden: OpRelease (OpReleaseOwner) with a Principal matched the
	// hold's token (owner) but the hold was granted to another principal;
	// state unchanged.
	Forbidden Status = 8
)

func (s Status) String() string {
	switch s {
	case Granted:
		return "granted"
	case Existing:
		return "existing"
	case Busy:
		return "busy"
	case Released:
		return "released"
	case NotHeld:
		return "not held"
	case Done:
		return "done"
	case Invalid:
		return "invalid"
	case Forbidden:
		return "forbidden"
	}
	return "unknown"
}

// Hold is the current grant of a key.
type Hold struct {
	Token     uint64 // fencing token: strictly increasing across all grants
	Owner     Owner
	LeaseMs   uint32
	GrantedAt int64 // batch time of the grant
	ExpiresAt int64 // earliest batch time at which OpExpire may end it

	// Principal is who it was granted to; empty when granted without one.
	Principal string
}

// Result is the outcome of one Op, in the order of the batch.
type Result struct {
	Status Status
	Hold   Hold // Granted, Existing: the hold; Released: the ended hold

	Coord *coordsm.Result // coordination kinds (Status Done): the per-operation outcome
}

// State is the replicated state. The zero value is not usable; call New.
type State struct {
	lastToken uint64
	lastTime  int64
	holds     map[string]Hold
	// order holds the keys of holds, sorted, so that the console pages
	// through them without sorting every key (console.go). Clone shares it
	// copy-on-write.
	order    *btree.BTreeG[string]
	members  map[string]string // node id -> client address
	cluster  ClusterID
	admitted map[string]Admission // participants (see OpAdmit)
	coord    *coordsm.State       // coordination nodes, sessions and semaphores
	// heldBy counts the holds of each principal (Hold.Principal), derived
	// from holds: the leader reads it for per-principal quotas.
	heldBy map[string]int
}

// New returns an empty state.
func New() *State {
	return &State{holds: make(map[string]Hold), order: newKeyOrder(), members: make(map[string]string), admitted: make(map[string]Admission), coord: coordsm.New(),
		heldBy: make(map[string]int)}
}

// Admission is a participant's record: the incarnation of its data
// directory (0 if unknown: an older ticketd) and the log index of the entry
// that recorded it (0 if unknown: read from a snapshot written before
// indexes were recorded).
type Admission struct {
	Incarnation uint64
	Index       uint64
}

// Apply applies one committed batch and returns one result per op.
func (s *State) Apply(b Batch) []Result {
	return s.ApplyInto(b, make([]Result, 0, len(b.Ops)))
}

// ApplyInto is Apply with a caller-provided result slice (appended to).
func (s *State) ApplyInto(b Batch, res []Result) []Result {
	now := b.Time
	if now < s.lastTime {
		now = s.lastTime // a new leader's clock may lag: time never goes backwards
	}
	s.lastTime = now
	for i := range b.Ops {
		res = append(res, s.apply(now, b.Index, &b.Ops[i]))
	}
	return res
}

// apply routes op to the part of the state that owns its kind (kinds.go).
func (s *State) apply(now int64, index uint64, op *Op) Result {
	switch owners[op.Kind] {
	case ownerTickets, ownerCluster:
		return s.applyTicket(now, index, op)
	case ownerCoordination:
		return s.applyCoord(now, op)
	}
	return Result{Status: Invalid}
}

// applyTicket applies a ticket or cluster identity op (index: its entry's).
func (s *State) applyTicket(now int64, index uint64, op *Op) Result {
	switch op.Kind {
	case OpAcquire:
		if op.LeaseMs == 0 || op.Key == "" {
			return Result{Status: Invalid}
		}
		if h, ok := s.holds[op.Key]; ok {
			if h.Owner == op.Owner && h.Principal == op.Principal {
				return Result{Status: Existing, Hold: h}
			}
			return Result{Status: Busy}
		}
		s.lastToken++
		h := Hold{Token: s.lastToken, Owner: op.Owner, LeaseMs: op.LeaseMs, GrantedAt: now, ExpiresAt: now + int64(op.LeaseMs), Principal: op.Principal}
		s.holds[op.Key] = h
		s.order.ReplaceOrInsert(op.Key)
		s.heldBy[h.Principal]++
		return Result{Status: Granted, Hold: h}
	case OpRelease:
		h, ok := s.holds[op.Key]
		if !ok || h.Token != op.Token {
			return Result{Status: NotHeld}
		}
		if !mayRelease(op.Principal, h) {
			return Result{Status: Forbidden}
		}
		s.dropHold(op.Key, h)
		return Result{Status: Released, Hold: h}
	case OpReleaseOwner:
		h, ok := s.holds[op.Key]
		if !ok || h.Owner != op.Owner {
			return Result{Status: NotHeld}
		}
		if !mayRelease(op.Principal, h) {
			return Result{Status: Forbidden}
		}
		s.dropHold(op.Key, h)
		return Result{Status: Released, Hold: h}
	case OpExpire:
		h, ok := s.holds[op.Key]
		if !ok || h.Token != op.Token || now < h.ExpiresAt {
			return Result{Status: NotHeld}
		}
		s.dropHold(op.Key, h)
		return Result{Status: Released, Hold: h}
	case OpTakeover:
		if op.NodeID != "" {
			s.members[op.NodeID] = op.Addr
		}
		for k, h := range s.holds {
			if e := now + int64(h.LeaseMs); e > h.ExpiresAt {
				h.ExpiresAt = e
				s.holds[k] = h
			}
		}
		s.coord.Takeover(now)
		return Result{Status: Done}
	case OpSetCluster:
		if op.Cluster == (ClusterID{}) {
			return Result{Status: Invalid}
		}
		s.cluster = op.Cluster
		clear(s.admitted)
		return Result{Status: Done}
	case OpAdmit, OpForget:
		if op.NodeID == "" {
			return Result{Status: Invalid}
		}
		if op.Kind == OpAdmit {
			s.admitted[op.NodeID] = Admission{Incarnation: op.Incarnation, Index: index}
		} else {
			delete(s.admitted, op.NodeID)
		}
		return Result{Status: Done}
	}
	return Result{Status: Invalid}
}

// mayRelease: a release without a principal (unrestricted) ends any hold; one
// with a principal ends holds granted to it, or granted without a principal
// (before principals were configured).
func mayRelease(principal string, h Hold) bool {
	return principal == "" || h.Principal == "" || h.Principal == principal
}

// dropHold removes key's hold h.
func (s *State) dropHold(key string, h Hold) {
	s.forget(key)
	if s.heldBy[h.Principal]--; s.heldBy[h.Principal] <= 0 {
		delete(s.heldBy, h.Principal)
	}
}

// reindex rebuilds what is derived from holds (after a restore).
func (s *State) reindex() {
	s.heldBy = make(map[string]int)
	for _, h := range s.holds {
		s.heldBy[h.Principal]++
	}
}

// HeldBy is the number of tickets held by principal ("" counts the holds
// granted without one).
func (s *State) HeldBy(principal string) int { return s.heldBy[principal] }

// Get returns the hold of key, if any.
func (s *State) Get(key string) (Hold, bool) {
	h, ok := s.holds[key]
	return h, ok
}

// Len returns the number of held keys.
func (s *State) Len() int { return len(s.holds) }

// Range calls fn for every hold, in no particular order, until fn returns false.
func (s *State) Range(fn func(key string, h Hold) bool) {
	for k, h := range s.holds {
		if !fn(k, h) {
			return
		}
	}
}

// LastToken returns the largest token ever granted.
func (s *State) LastToken() uint64 { return s.lastToken }

// RaiseTokenFloor makes every later grant's token larger than t. It is used
// only when a backup is restored, before the state is replicated.
func (s *State) RaiseTokenFloor(t uint64) {
	if t > s.lastToken {
		s.lastToken = t
	}
}

// LastTime returns the latest batch time applied (Unix ms).
func (s *State) LastTime() int64 { return s.lastTime }

// MemberAddr returns the client address a node recorded when it last became leader.
func (s *State) MemberAddr(nodeID string) (string, bool) {
	a, ok := s.members[nodeID]
	return a, ok
}

// Members returns node id -> client address, sorted by id for stable output.
func (s *State) Members() [][2]string {
	out := make([][2]string, 0, len(s.members))
	for id, a := range s.members {
		out = append(out, [2]string{id, a})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// Cluster returns the cluster's ID (zero before the first leader set it).
func (s *State) Cluster() ClusterID { return s.cluster }

// SetCluster replaces the cluster ID and forgets the participants. It is
// used only when a backup is restored, before the state is replicated.
func (s *State) SetCluster(id ClusterID) {
	s.cluster = id
	clear(s.admitted)
}

// Admitted reports whether nodeID is a participant (see OpAdmit).
func (s *State) Admitted(nodeID string) bool { _, ok := s.admitted[nodeID]; return ok }

// Incarnation returns the data-directory incarnation recorded with
// participant nodeID: 0 if it is not a participant or was recorded without one.
func (s *State) Incarnation(nodeID string) uint64 { return s.admitted[nodeID].Incarnation }

// AdmissionOf returns participant nodeID's record (zero if it is not one).
func (s *State) AdmissionOf(nodeID string) Admission { return s.admitted[nodeID] }

// Participants returns the participants, sorted.
func (s *State) Participants() []string {
	out := make([]string, 0, len(s.admitted))
	for id := range s.admitted {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Clone returns a deep copy, for snapshots taken while applying continues.
func (s *State) Clone() *State {
	c := &State{lastToken: s.lastToken, lastTime: s.lastTime, cluster: s.cluster,
		holds: make(map[string]Hold, len(s.holds)), order: s.order.Clone(), members: make(map[string]string, len(s.members)),
		admitted: make(map[string]Admission, len(s.admitted)), coord: s.coord.Clone()}
	for id, a := range s.admitted {
		c.admitted[id] = a
	}
	for k, h := range s.holds {
		c.holds[k] = h
	}
	c.heldBy = make(map[string]int, len(s.heldBy))
	for p, n := range s.heldBy {
		c.heldBy[p] = n
	}
	for k, v := range s.members {
		c.members[k] = v
	}
	return c
}
