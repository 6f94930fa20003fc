package console

import "time"

// The views are what one page shows. A follower gets them from the leader
// as JSON (the admin op "console"), so every field has a JSON name; both
// sides are ticketd of one release, and an unknown field is ignored.

// Page names, as in the URL and in the admin op "console".
const (
	PageCluster      = "cluster"
	PageTickets      = "tickets"
	PageCoordination = "coordination"
	PageRefusals     = "refusals"
)

// Pages lists the pages in the order of the navigation bar.
var Pages = []string{PageCluster, PageTickets, PageCoordination, PageRefusals}

// Query selects what a page shows. Only the tickets page reads the fields
// beyond Page.
type Query struct {
	Page   string
	Prefix string // tickets: keys that start with it
	After  string // tickets: keys after this one (the cursor of the next page)
	Last   bool   // tickets: the last page of the prefix's keys
	// SortLeft orders the prefix's keys by time left, soonest lease end
	// first (then by key); the cursor is then After with AfterEnd, the
	// Unix ms at which After's lease ends.
	SortLeft bool
	AfterEnd int64
}

// Cluster is the cluster page: the answering server's view of the cluster.
type Cluster struct {
	NodeID        string         `json:"node_id"`
	Role          string         `json:"role"`
	LeaderID      string         `json:"leader_id"`
	LeaderAddr    string         `json:"leader_addr"`
	Term          uint64         `json:"term"`
	CommitIndex   uint64         `json:"commit_index"`
	AppliedIndex  uint64         `json:"applied_index"`
	LastToken     uint64         `json:"last_token"`
	Held          int            `json:"held"`
	Waiters       int64          `json:"waiters"`
	ClusterID     string         `json:"cluster_id"`
	Version       string         `json:"version"` // the leader's release
	Ready         bool           `json:"ready"`
	Health        string         `json:"health"` // "ready", else why not
	Members       []Member       `json:"members"`
	LeaderChanges []LeaderChange `json:"leader_changes"` // newest first
}

// Member is one server of the cluster configuration.
type Member struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	ClientAddr string `json:"client_addr"`
	Voter      bool   `json:"voter"`
	Leader     bool   `json:"leader"`
	// Participant: recorded as holding the cluster's state; Incarnation is
	// its data directory's incarnation (hex), "" when not recorded.
	Participant bool   `json:"participant"`
	Incarnation string `json:"incarnation"`
	// Health is the leader's word on the member: "ready" (or why not) for
	// itself, "reachable", or since when its heartbeats fail.
	Health string `json:"health"`
	OK     bool   `json:"ok"`
	// Version is the member's release as its Raft handshake with the
	// leader stated it (or why it is not known).
	Version string `json:"version"`
	// Replication, known on the leader for the other members: the last
	// log index the member acknowledged, and how many committed entries
	// it lacks.
	Replication bool   `json:"replication"`
	MatchIndex  uint64 `json:"match_index"`
	Behind      uint64 `json:"behind"`
}

// LeaderChange is one change of leader this server saw.
type LeaderChange struct {
	At       time.Time `json:"at"`
	LeaderID string    `json:"leader_id"` // "" when the cluster lost its leader
	Term     uint64    `json:"term"`
}

// Tickets is one page of held keys.
type Tickets struct {
	Prefix  string `json:"prefix"`
	After   string `json:"after"`
	Matched int    `json:"matched"` // held keys with the prefix, on every page
	// MatchedMore: more keys than Matched have the prefix (the count stops
	// at a bound).
	MatchedMore bool     `json:"matched_more"`
	Rows        []Ticket `json:"rows"`
	Next        string   `json:"next"` // the After of the next page, "" on the last one
	// NextEnd is the next page's AfterEnd when the keys are ordered by
	// time left.
	NextEnd  int64 `json:"next_end"`
	SortLeft bool  `json:"sort_left"`
	// Last: this is the last page of the prefix's keys (asked as such);
	// Before: keys come before it.
	Last   bool `json:"last"`
	Before bool `json:"before"`
}

// Ticket is one held key. Owner is the owner id in hex; the principal is
// who acquired it ("" when granted without principals configured).
type Ticket struct {
	Key       string    `json:"key"`
	Token     uint64    `json:"token"`
	Owner     string    `json:"owner"`
	Principal string    `json:"principal"`
	Remote    string    `json:"remote"` // the connection the leader granted it to, "" before this leader
	GrantedAt time.Time `json:"granted_at"`
	LeftMs    int64     `json:"left_ms"` // until the lease may end
	LeaseMs   uint32    `json:"lease_ms"`
	Waiters   []Waiter  `json:"waiters"`
	// MoreWaiters counts the queued acquires beyond those listed.
	MoreWaiters int `json:"more_waiters"`
}

// Waiter is one acquire queued for a key.
type Waiter struct {
	Owner     string `json:"owner"`
	Principal string `json:"principal"`
	Remote    string `json:"remote"`
	WaitedMs  int64  `json:"waited_ms"`
}

// Coordination is the coordination page.
type Coordination struct {
	Nodes []CoordNode `json:"nodes"`
	// MoreNodes counts the nodes beyond those listed.
	MoreNodes int `json:"more_nodes"`
}

// CoordNode is one coordination node with its configuration.
type CoordNode struct {
	Path          string      `json:"path"`
	SelfCheckMs   uint32      `json:"self_check_ms"`
	GraceMs       uint32      `json:"grace_ms"`
	ReadMode      string      `json:"read_mode"`
	AttachMode    string      `json:"attach_mode"`
	MaxSessions   uint32      `json:"max_sessions"`
	MaxSemaphores uint32      `json:"max_semaphores"`
	MaxWaiters    uint32      `json:"max_waiters"`
	Sessions      []Session   `json:"sessions"`
	MoreSessions  int         `json:"more_sessions"`
	Semaphores    []Semaphore `json:"semaphores"`
	MoreSems      int         `json:"more_semaphores"`
}

// Session is one coordination session (never its protection key).
type Session struct {
	ID        uint64 `json:"id"`
	Desc      string `json:"desc"`
	Attached  bool   `json:"attached"`
	TimeoutMs uint64 `json:"timeout_ms"`
	SeqNo     uint64 `json:"seq_no"`
}

// Semaphore is one semaphore with its owners and waiters.
type Semaphore struct {
	Name        string   `json:"name"`
	Limit       uint64   `json:"limit"`
	Count       uint64   `json:"count"`
	Ephemeral   bool     `json:"ephemeral"`
	Data        string   `json:"data"` // the semaphore's data, cut at consoleDataShown bytes
	DataBytes   int      `json:"data_bytes"`
	Owners      []Holder `json:"owners"`
	MoreOwners  int      `json:"more_owners"`
	Waiters     []Holder `json:"waiters"`
	MoreWaiters int      `json:"more_waiters"`
}

// Holder is an owner or a waiter of a semaphore.
type Holder struct {
	Session uint64 `json:"session"`
	Desc    string `json:"desc"` // the session's description, which names its client
	Count   uint64 `json:"count"`
	OrderID uint64 `json:"order_id"`
}

// Refusals are the latest refused requests, newest first: the leader's,
// and on a follower its own beside them.
type Refusals struct {
	Records []Refusal `json:"records"`
	Kept    int       `json:"kept"` // the ring's size
}

// Refusal is one audit record of a refused request or hello.
type Refusal struct {
	At        time.Time `json:"at"`
	Node      string    `json:"node"` // the server that refused`
	Principal string    `json:"principal"`
	Op        string    `json:"op"`
	Outcome   string    `json:"outcome"`
	Reason    string    `json:"reason"`
	Key       string    `json:"key"`
	Remote    string    `json:"remote"`
}

// View is the answer for one Query: the page's view, one of its fields
// set, and the node that made it.
type View struct {
	From         string        `json:"from"` // node id of the server that read it (the leader)
	Cluster      *Cluster      `json:"cluster,omitempty"`
	Tickets      *Tickets      `json:"tickets,omitempty"`
	Coordination *Coordination `json:"coordination,omitempty"`
	Refusals     *Refusals     `json:"refusals,omitempty"`
}
