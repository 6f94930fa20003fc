package node

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// Cluster identity.
//
// Every cluster has an ID (16 random bytes): set by the first leader of a
// new cluster, replaced by every restore. It lives in the replicated state
// (so it is in snapshots and reaches servers that join) and in the CLUSTER
// file of each member's data directory. Every Raft connection starts with a
// handshake in which both ends state their node id, their cluster ID and
// whether their data directory is empty; a server refuses a peer of another
// cluster, and a server that holds the cluster's state refuses a peer that
// should hold it but does not (a member that lost its data directory).
//
// A server is in one of three states:
//   - empty: no Raft state; it waits until a leader adds it;
//   - provisional: Raft state but no cluster ID yet (a new cluster before its
//     first leader set the ID, or a data directory from before cluster IDs);
//   - settled: it knows its cluster's ID.
//
// Only a settled server decides about empty or provisional peers, and only
// a leader admits one: it first commits OpAdmit for it (the peer is then a
// participant), so that if that peer later shows up empty again the cluster
// knows it has lost data the cluster counted on. An empty server deals only
// with settled peers and never votes (voteGate); a node id that is neither
// in the configuration nor a participant is refused; a provisional server
// that met a settled member never sets an ID. docs/design.md ("Cluster
// identity: the protocol") has the state machine and why it is safe.
//
// Every data directory also has an incarnation: a random number created
// with its Raft state (the INCARNATION file), stated in the handshake and
// recorded with each participant. A provisional participant with the
// recorded incarnation is the same directory, lagging behind: it took part
// before the first leader set the ID and has not applied that entry yet (a
// young cluster whose first leader failed, F7). It is accepted and catches
// up through Raft. A different incarnation is a directory that lost its
// data and started again: refused.

// clusterFile holds the cluster ID in hex, beside MEMBER.
const clusterFile = "CLUSTER"

// ErrClusterMismatch reports a peer, a data directory or a server being
// added that belongs to another cluster.
var ErrClusterMismatch = errors.New("cluster mismatch")

// ErrRefused reports a Raft handshake that the other end refused.
var ErrRefused = errors.New("raft connection refused")

// FormatClusterID renders an ID as hex; the zero ID as "none".
func FormatClusterID(id fsm.ClusterID) string {
	if id == (fsm.ClusterID{}) {
		return "none"
	}
	return hex.EncodeToString(id[:])
}

// NewClusterID returns a random cluster ID.
func NewClusterID() fsm.ClusterID {
	var id fsm.ClusterID
	if _, err := rand.Read(id[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return id
}

func clusterPath(dir string) string { return filepath.Join(dir, clusterFile) }

// incarnationFile holds the data directory's incarnation (16 hex digits).
const incarnationFile = "INCARNATION"

func incarnationPath(dir string) string { return filepath.Join(dir, incarnationFile) }

// newIncarnation returns a random incarnation, never 0 (0 means unknown).
func newIncarnation() uint64 {
	for {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			panic(err) // crypto/rand does not fail on supported systems
		}
		if v := binary.BigEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

// readIncarnationFile returns dir's incarnation, or 0 if there is none.
func readIncarnationFile(dir string) (uint64, error) {
	b, err := os.ReadFile(incarnationPath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(raw) != 8 || binary.BigEndian.Uint64(raw) == 0 {
		return 0, fmt.Errorf("%s does not hold an incarnation (16 hex digits, not all zero)", incarnationPath(dir))
	}
	return binary.BigEndian.Uint64(raw), nil
}

// writeIncarnationFile replaces dir's INCARNATION file atomically and durably.
func writeIncarnationFile(dir string, inc uint64) error {
	return writeFileSync(dir, incarnationPath(dir), fmt.Sprintf("%016x\n", inc))
}

// readClusterFile returns the ID in dir's CLUSTER file, or zero if there is none.
func readClusterFile(dir string) (fsm.ClusterID, error) {
	var id fsm.ClusterID
	b, err := os.ReadFile(clusterPath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return id, nil
	}
	if err != nil {
		return id, err
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(raw) != len(id) {
		return id, fmt.Errorf("%s does not hold a cluster ID (32 hex digits)", clusterPath(dir))
	}
	copy(id[:], raw)
	return id, nil
}

// writeClusterFile replaces dir's CLUSTER file atomically and durably.
func writeClusterFile(dir string, id fsm.ClusterID) error {
	return writeFileSync(dir, clusterPath(dir), FormatClusterID(id)+"\n")
}

// writeFileSync replaces path (in dir) with content: written to a temporary
// file, fsynced, renamed over path, and the directory fsynced.
func writeFileSync(dir, path, content string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}

// Handshake frames. The dialer sends a hello, the acceptor a reply; both
// then run the check below and close the connection when it fails. Raft's
// own bytes follow only on an accepted connection.
//
//	hello: "TKRC" ver:u8 kind:u8 cluster:[16] state:u8 id:str8 [incarnation:u64]
//	reply: "TKRC" ver:u8 verdict:u8 cluster:[16] state:u8 id:str8 [incarnation:u64] reason:str16
//
// Version 2 adds the incarnation; version 1 (older ticketd) is read with
// incarnation 0 (unknown). The acceptor replies in the version of the hello,
// so an older dialer reads the reply. An older acceptor refuses a version 2
// hello by closing the connection unanswered; the dialer then says hello
// once more in version 1 (see hello).
var handshakeMagic = [4]byte{'T', 'K', 'R', 'C'}

const (
	handshakeVersion   = 2
	handshakeVersionV1 = 1
	kindRaft           = 1 // a Raft connection
	kindProbe          = 2 // members add asks who is there; no Raft traffic follows

	stateEmpty       = 0
	stateProvisional = 1
	stateSettled     = 2

	handshakeTimeout = 5 * time.Second

	// maxTracked bounds what a server keeps about the peers it met (the
	// refusals it logged, the peers seen while it has no cluster ID):
	// anyone who reaches the Raft port can make up node ids.
	maxTracked = 256
)

func stateName(s byte) string {
	switch s {
	case stateEmpty:
		return "empty (waiting to be added)"
	case stateProvisional:
		return "without a cluster ID yet"
	case stateSettled:
		return "settled"
	}
	return fmt.Sprintf("state %d", s)
}

// peerInfo is what the other end said about itself.
type peerInfo struct {
	ID          string
	Cluster     fsm.ClusterID
	State       byte
	Incarnation uint64 // of its data directory; 0 if unknown (version 1)
	// Version is the handshake version the frame was read in, or is to be
	// written in (0 means the current one).
	Version byte
}

func (p peerInfo) version() byte {
	if p.Version == 0 {
		return handshakeVersion
	}
	return p.Version
}

func appendIdentity(b []byte, p peerInfo) []byte {
	b = append(b, p.Cluster[:]...)
	b = append(b, p.State, byte(len(p.ID)))
	b = append(b, p.ID...)
	if p.version() >= 2 {
		b = binary.BigEndian.AppendUint64(b, p.Incarnation)
	}
	return b
}

// appendHello writes me's hello in me.Version (0: the current one).
func appendHello(b []byte, kind byte, me peerInfo) []byte {
	b = append(b, handshakeMagic[:]...)
	b = append(b, me.version(), kind)
	return appendIdentity(b, me)
}

// appendReply writes me's reply in me.Version (0: the current one).
func appendReply(b []byte, refused bool, me peerInfo, reason string) []byte {
	b = append(b, handshakeMagic[:]...)
	v := byte(0)
	if refused {
		v = 1
	}
	b = append(b, me.version(), v)
	b = appendIdentity(b, me)
	if len(reason) > 60000 {
		reason = reason[:60000]
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(reason)))
	return append(b, reason...)
}

// errNoHandshake: the other end closed the connection before sending a byte
// of its handshake (an older ticketd refusing a version it does not speak,
// or a server going away).
var errNoHandshake = errors.New("the peer closed the connection without a handshake")

// readHandshake reads a hello (reply=false) or a reply: the byte after the
// version is the kind or the verdict. p.Version is the frame's version.
func readHandshake(r io.Reader, reply bool) (p peerInfo, second byte, reason string, err error) {
	var head [4 + 1 + 1 + 16 + 1 + 1]byte
	// The magic first, on its own: something that is not a ticketd (a
	// client dialling the Raft port by mistake) is cut off at once rather
	// than left waiting for bytes it will never send.
	if n, err := io.ReadFull(r, head[:4]); err != nil {
		if n == 0 && !isTimeout(err) {
			return p, 0, "", fmt.Errorf("read handshake: %w (%w)", errNoHandshake, err)
		}
		return p, 0, "", fmt.Errorf("read handshake: %w", err)
	}
	if [4]byte(head[:4]) != handshakeMagic {
		return p, 0, "", fmt.Errorf("the peer did not start with a Ticketing Raft handshake (an older ticketd, or not ticketd at all)")
	}
	if _, err = io.ReadFull(r, head[4:]); err != nil {
		return p, 0, "", fmt.Errorf("read handshake: %w", err)
	}
	if head[4] < handshakeVersionV1 || head[4] > handshakeVersion {
		return p, 0, "", fmt.Errorf("the peer speaks Raft handshake version %d, this ticketd versions %d to %d: run the same ticketd version on every server", head[4], handshakeVersionV1, handshakeVersion)
	}
	p.Version = head[4]
	second = head[5]
	copy(p.Cluster[:], head[6:22])
	p.State = head[22]
	id := make([]byte, head[23])
	if _, err = io.ReadFull(r, id); err != nil {
		return p, 0, "", fmt.Errorf("read handshake: %w", err)
	}
	p.ID = string(id)
	if p.Version >= 2 {
		var inc [8]byte
		if _, err = io.ReadFull(r, inc[:]); err != nil {
			return p, 0, "", fmt.Errorf("read handshake: %w", err)
		}
		p.Incarnation = binary.BigEndian.Uint64(inc[:])
	}
	if reply {
		var n [2]byte
		if _, err = io.ReadFull(r, n[:]); err != nil {
			return p, 0, "", fmt.Errorf("read handshake: %w", err)
		}
		txt := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err = io.ReadFull(r, txt); err != nil {
			return p, 0, "", fmt.Errorf("read handshake: %w", err)
		}
		reason = string(txt)
	}
	return p, second, reason, nil
}

// identity is this server's side of the handshake.
type identity struct {
	nodeID      string
	dir         string
	log         *slog.Logger
	incarnation uint64 // of this data directory (INCARNATION)

	// Set once Raft runs (the handshake needs the leader state, the
	// configuration and the participants).
	r   atomic.Pointer[raft.Raft]
	fsm *stateMachine

	mu        sync.Mutex
	cluster   fsm.ClusterID
	hasState  bool
	settling  bool              // a new leader is committing the cluster ID
	admitting map[string]uint64 // peers this leader admitted (their incarnations), accepted until they settle
	seen      map[string]uint64 // peers met while provisional (participants of the new cluster): their incarnations
	// settledPeer is a member of the configuration met with a cluster ID
	// while this server had none: this server then never sets one.
	settledPeer    string
	settledCluster fsm.ClusterID
	known          map[string]uint64 // participants in this directory's log at start (applied or not): their incarnations
	conns          map[*hsConn]fsm.ClusterID
	logged         map[string]time.Time // refusal messages, at most one per peer and reason a minute
	// floodLogged: when the line saying that refusals went unlogged was logged.
	floodLogged time.Time
}

func (m *identity) self() peerInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.selfLocked()
}

func (m *identity) selfLocked() peerInfo {
	st := byte(stateEmpty)
	switch {
	case m.cluster != (fsm.ClusterID{}):
		st = stateSettled
	case m.hasState:
		st = stateProvisional
	}
	return peerInfo{ID: m.nodeID, Cluster: m.cluster, State: st, Incarnation: m.incarnation}
}

// Cluster returns the ID this server knows (zero if none).
func (m *identity) Cluster() fsm.ClusterID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cluster
}

// settle records a new cluster ID (applied from the log or a snapshot) and
// writes the CLUSTER file.
func (m *identity) settle(id fsm.ClusterID) {
	m.mu.Lock()
	if id == m.cluster || id == (fsm.ClusterID{}) {
		m.mu.Unlock()
		return
	}
	old := m.cluster
	m.cluster, m.hasState, m.settling = id, true, false
	if old != (fsm.ClusterID{}) {
		clear(m.known) // a restore: the old cluster's participants are not this one's
	}
	// A new ID replacing another (a restore) ends every connection made
	// under the old one. The first ID of a new cluster does not: those
	// connections are with the servers that formed it, and ending them
	// would cost the new cluster an election.
	var stale []*hsConn
	for c, cid := range m.conns {
		if old != (fsm.ClusterID{}) && cid != id {
			stale = append(stale, c)
		}
	}
	m.mu.Unlock()
	if err := writeClusterFile(m.dir, id); err != nil {
		// The ID is in the replicated state; the file is what a restart
		// checks first. Without it this server would start provisional and
		// be refused by its cluster, so stop rather than run half-identified.
		panic(fmt.Sprintf("ticketd: cannot write %s: %v", clusterPath(m.dir), err))
	}
	if old == (fsm.ClusterID{}) {
		m.log.Info("cluster ID set", "cluster", FormatClusterID(id))
	} else {
		m.log.Warn("cluster ID replaced (restore)", "cluster", FormatClusterID(id), "previous", FormatClusterID(old))
	}
	for _, c := range stale {
		_ = c.Close()
	}
}

// check decides whether a handshaked connection may carry Raft traffic.
// dialed is the address dialled (empty on the accepting side). It returns
// the refusal reason, or "" to accept. The rules are the identity protocol
// of docs/design.md: an empty data directory deals only with a settled
// cluster, whose leader admits it; an unknown node id is refused; a server
// without a cluster ID never founds a second history beside a settled one.
func (m *identity) check(p peerInfo, dialed string) string {
	me := m.self()
	if p.ID == me.ID {
		return fmt.Sprintf("the peer at %s also has node_id %q: every server needs its own node_id", dialed, p.ID)
	}
	if dialed != "" && m.r.Load() != nil {
		if want := m.configIDAt(dialed); want != "" && want != p.ID {
			return fmt.Sprintf("this cluster's configuration has %s at %s, but the server there is %s: fix the address (ticketctl members remove %s, then members add with the right address) or the server's node_id", want, dialed, p.ID, want)
		}
	}
	if me.State == stateEmpty {
		// Nothing here to lose, nothing to vouch for: this server takes
		// part only in a cluster that has an identity, and only once that
		// cluster's leader admits it (the leader's end of this handshake
		// checks the incarnation). A peer without a cluster ID could use
		// it to found a second history.
		if p.State != stateSettled {
			return fmt.Sprintf("this server's data directory is empty: it takes part only in a cluster with an ID, once its leader admits it, and %s is %s", p.ID, stateName(p.State))
		}
		return ""
	}
	if me.State == stateSettled && p.State == stateSettled && p.Cluster != me.Cluster {
		return fmt.Sprintf("%s belongs to cluster %s, this server to cluster %s: they hold different histories and must not be mixed. "+
			"If %s should be a member here, stop it, empty its data directory, start it with --join and run ticketctl members add %s RAFTADDR on this cluster (after ticketctl members remove %s if it is listed)",
			p.ID, FormatClusterID(p.Cluster), FormatClusterID(me.Cluster), p.ID, p.ID, p.ID)
	}
	if m.r.Load() == nil {
		return "this server is starting; try again in a moment"
	}
	if !m.member(p.ID) {
		// Participants come only from the bootstrap list and members add,
		// never from a handshake: anyone who reaches the Raft port can
		// make up a node id.
		return fmt.Sprintf("%s is not a member of this cluster (neither in its configuration nor being added): add it with ticketctl members add %s RAFTADDR", p.ID, p.ID)
	}
	if me.State != stateSettled {
		if p.State == stateSettled {
			// A server of this configuration already belongs to a cluster:
			// this server catches up from it or is refused by it, and
			// never sets an ID of its own.
			m.metSettled(p)
			if m.isLeader() {
				return fmt.Sprintf("this server leads a cluster without an ID yet, and %s belongs to cluster %s", p.ID, FormatClusterID(p.Cluster))
			}
			return "" // the settled end decides
		}
		// Provisional peers of one bootstrap list form a new cluster together.
		m.mu.Lock()
		_, met := m.seen[p.ID]
		if me.State == stateProvisional && m.settling && m.seen != nil && !met {
			m.mu.Unlock()
			return "this cluster's first leader is setting the cluster ID; try again in a moment"
		}
		if m.seen != nil && (met || len(m.seen) < maxTracked) {
			m.seen[p.ID] = p.Incarnation
		}
		m.mu.Unlock()
		return ""
	}
	if p.State == stateSettled {
		m.mu.Lock()
		delete(m.admitting, p.ID) // caught up: from now on it is an ordinary member
		m.mu.Unlock()
		if m.isLeader() && !m.participant(p.ID) {
			go func() { // a voter of the configuration from before participants were recorded
				// On failure the next handshake of that peer tries again.
				if err := m.admit(p.ID, p.Incarnation); err != nil {
					m.log.Warn("recording a participant failed; retried at its next handshake", "node", p.ID, "err", err)
				}
			}()
		}
		return ""
	}
	// An empty or provisional peer: accepted only by the leader admitting
	// that very data directory (same incarnation), or as a participant's
	// own directory that has not applied the cluster ID yet.
	m.mu.Lock()
	inc, admitting := m.admitting[p.ID]
	m.mu.Unlock()
	if admitting && inc == p.Incarnation && m.isLeader() {
		return ""
	}
	if m.participant(p.ID) {
		if rec := m.incarnationOf(p.ID); p.State == stateProvisional && rec != 0 && rec == p.Incarnation {
			// The same data directory that took part, without the cluster
			// ID yet: it has not applied the entry that set it (F7). It
			// holds what it acknowledged and catches up through Raft.
			return ""
		}
		return fmt.Sprintf("%s has been a member of cluster %s but its data directory is now %s: it has lost data the cluster counted on and must not vote or count towards a majority. "+
			"Remove it and add it back empty: ticketctl members remove %s; start it with an empty data directory and --join; ticketctl members add %s RAFTADDR",
			p.ID, FormatClusterID(me.Cluster), stateName(p.State), p.ID, p.ID)
	}
	if dialed != "" && m.isLeader() {
		// A voter of this cluster's configuration that has never been
		// connected (started after the cluster formed): admit it, durably,
		// before it receives anything.
		if err := m.admit(p.ID, p.Incarnation); err != nil {
			return fmt.Sprintf("could not record %s as a participant: %v", p.ID, err)
		}
		return ""
	}
	return fmt.Sprintf("%s is %s and only the leader of cluster %s admits it", p.ID, stateName(p.State), FormatClusterID(me.Cluster))
}

// metSettled records that a server of this configuration holds a cluster
// ID while this one has none: from then on this server never sets an ID.
func (m *identity) metSettled(p peerInfo) {
	m.mu.Lock()
	first := m.settledPeer == ""
	if first {
		m.settledPeer, m.settledCluster = p.ID, p.Cluster
	}
	m.mu.Unlock()
	if first {
		m.log.Warn("a member of this cluster's configuration already holds a cluster ID: this server catches up from it and will not set an ID of its own",
			"peer", p.ID, "cluster", FormatClusterID(p.Cluster))
	}
}

// member reports whether id is in the Raft configuration, a participant,
// being admitted by this leader, or the leader this server follows.
func (m *identity) member(id string) bool {
	m.mu.Lock()
	_, adm := m.admitting[id]
	m.mu.Unlock()
	if adm || m.participant(id) {
		return true
	}
	r := m.r.Load()
	if r == nil {
		return false
	}
	if _, leader := r.LeaderWithID(); string(leader) == id {
		// The leader this server follows (it spoke over a connection of a
		// member): this server may be behind the entries that made it a
		// member, as after installing an older snapshot when it joined.
		return true
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// mayVote says why this server must not grant votes, or "" if it may: an
// empty data directory has nothing to vouch for (it may have lost what it
// acknowledged), so it never votes.
func (m *identity) mayVote() string {
	if m.self().State == stateEmpty {
		return "this server's data directory is empty (waiting to be added): it does not vote"
	}
	return ""
}

func (m *identity) isLeader() bool { r := m.r.Load(); return r != nil && r.State() == raft.Leader }

func (m *identity) participant(id string) bool {
	m.mu.Lock()
	_, k := m.known[id]
	m.mu.Unlock()
	if k || m.fsm == nil {
		return k
	}
	m.fsm.mu.RLock()
	defer m.fsm.mu.RUnlock()
	return m.fsm.state.Admitted(id)
}

// incarnationOf returns the incarnation recorded with participant id: from
// the applied state, else from this directory's log at start; 0 if none.
func (m *identity) incarnationOf(id string) uint64 {
	if m.fsm != nil {
		m.fsm.mu.RLock()
		ok, inc := m.fsm.state.Admitted(id), m.fsm.state.Incarnation(id)
		m.fsm.mu.RUnlock()
		if ok {
			return inc
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.known[id]
}

func (m *identity) configIDAt(addr string) string {
	f := m.r.Load().GetConfiguration()
	if f.Error() != nil {
		return ""
	}
	for _, s := range f.Configuration().Servers {
		if string(s.Address) == addr {
			return string(s.ID)
		}
	}
	return ""
}

// admit commits OpAdmit for id (leader only), with the incarnation of its
// data directory, and accepts it while it catches up.
func (m *identity) admit(id string, inc uint64) error {
	b := fsm.Batch{Time: time.Now().UnixMilli(), Ops: []fsm.Op{{Kind: fsm.OpAdmit, NodeID: id, Incarnation: inc}}}
	if err := m.r.Load().Apply(fsm.AppendBatch(nil, &b), handshakeTimeout).Error(); err != nil {
		return err
	}
	m.mu.Lock()
	m.admitting[id] = inc
	m.mu.Unlock()
	m.log.Info("participant admitted", "node", id, "cluster", FormatClusterID(m.Cluster()))
	return nil
}

// expectJoin marks id's data directory (incarnation inc) as being added by
// this leader (members add).
func (m *identity) expectJoin(id string, inc uint64) {
	m.mu.Lock()
	m.admitting[id] = inc
	m.mu.Unlock()
}

// refused logs a refusal, at most once a minute per peer and reason.
func (m *identity) refused(side, addr string, p peerInfo, reason string) {
	m.refusedKey(side, addr, p, reason, p.ID+"|"+reason)
}

func (m *identity) refusedKey(side, addr string, p peerInfo, reason, key string) {
	m.mu.Lock()
	last, ok := m.logged[key]
	if ok && time.Since(last) < time.Minute {
		m.mu.Unlock()
		return
	}
	if !ok && len(m.logged) >= maxTracked {
		for k, at := range m.logged {
			if time.Since(at) >= time.Minute {
				delete(m.logged, k)
			}
		}
		if len(m.logged) >= maxTracked {
			// Made-up node ids, most likely: the lines of this minute say
			// enough, and the memory stays bounded.
			flood := time.Since(m.floodLogged) >= time.Minute
			if flood {
				m.floodLogged = time.Now()
			}
			m.mu.Unlock()
			if flood {
				m.log.Error("Raft connections refused from too many distinct node ids or reasons within a minute; no more refusals are logged this minute. Is the Raft port reachable from outside the cluster?", "limit", maxTracked)
			}
			return
		}
	}
	m.logged[key] = time.Now()
	me := m.selfLocked()
	m.mu.Unlock()
	m.log.Error("Raft connection refused", "side", side, "peer", p.ID, "peer_addr", addr,
		"peer_cluster", FormatClusterID(p.Cluster), "peer_state", stateName(p.State),
		"cluster", FormatClusterID(me.Cluster), "state", stateName(me.State), "reason", reason)
}

// hsConn is a handshaked connection, tracked so that a change of cluster ID
// ends it.
type hsConn struct {
	net.Conn
	m    *identity
	once sync.Once
}

func (c *hsConn) Close() error {
	c.once.Do(func() {
		c.m.mu.Lock()
		delete(c.m.conns, c)
		c.m.mu.Unlock()
	})
	return c.Conn.Close()
}

func (m *identity) track(c net.Conn, under fsm.ClusterID) net.Conn {
	h := &hsConn{Conn: c, m: m}
	m.mu.Lock()
	m.conns[h] = under
	m.mu.Unlock()
	return h
}

// clusterStream is raft.StreamLayer over TCP (optionally TLS) with the
// cluster handshake on every connection.
type clusterStream struct {
	ln  net.Listener
	adv net.Addr
	tls *tls.Config
	id  *identity

	accepted chan net.Conn
	closed   chan struct{}
	once     sync.Once
}

func newClusterStream(ln net.Listener, adv net.Addr, t *tls.Config, id *identity) *clusterStream {
	s := &clusterStream{ln: ln, adv: adv, tls: t, id: id, accepted: make(chan net.Conn), closed: make(chan struct{})}
	go s.acceptLoop()
	return s
}

func (s *clusterStream) acceptLoop() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			_ = s.Close()
			return
		}
		go s.serve(c) // a slow peer must not hold up the others
	}
}

// serve runs the accepting side of the handshake.
func (s *clusterStream) serve(raw net.Conn) {
	c := raw
	if s.tls != nil {
		c = tls.Server(raw, s.tls)
	}
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	p, kind, _, err := readHandshake(c, false)
	if err != nil {
		// Not a ticketd, or one that gave up: at most one line a minute
		// (the key leaves out the error text, which names the address).
		s.id.refusedKey("accept", raw.RemoteAddr().String(), peerInfo{ID: "?"}, "no valid handshake: "+err.Error(), "?|no valid handshake")
		c.Close()
		return
	}
	me := s.id.self()
	me.Version = p.Version // an older dialer reads only its own version
	reason := certBinding(c, p.ID)
	if kind == kindProbe && reason == "" {
		_, _ = c.Write(appendReply(nil, false, me, ""))
		c.Close()
		return
	}
	if reason == "" {
		reason = s.id.check(p, "")
	}
	if _, err := c.Write(appendReply(nil, reason != "", me, reason)); err != nil || reason != "" {
		if reason != "" {
			s.id.refused("accept", raw.RemoteAddr().String(), p, reason)
		}
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	tc := s.id.track(c, me.Cluster)
	select {
	case s.accepted <- tc:
	case <-s.closed:
		tc.Close()
	}
}

func (s *clusterStream) Accept() (net.Conn, error) {
	select {
	case c := <-s.accepted:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

func (s *clusterStream) Close() error {
	s.once.Do(func() { close(s.closed) })
	return s.ln.Close()
}

func (s *clusterStream) Addr() net.Addr { return s.adv }

func (s *clusterStream) dial(addr string, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if s.tls == nil {
		return d.Dial("tcp", addr)
	}
	return tls.DialWithDialer(d, "tcp", addr, s.tls)
}

// hello dials addr and exchanges hellos: in the current version, and once
// more in version 1 if the peer closed the connection unanswered (an older
// ticketd that does not read version 2).
func (s *clusterStream) hello(addr string, kind byte, timeout time.Duration) (net.Conn, peerInfo, byte, string, error) {
	var err error
	for _, v := range []byte{handshakeVersion, handshakeVersionV1} {
		var c net.Conn
		if c, err = s.dial(addr, timeout); err != nil {
			return nil, peerInfo{}, 0, "", err
		}
		me := s.id.self()
		me.Version = v
		c.SetDeadline(time.Now().Add(max(timeout, handshakeTimeout)))
		if _, err = c.Write(appendHello(nil, kind, me)); err != nil {
			c.Close()
			return nil, peerInfo{}, 0, "", err
		}
		p, second, reason, rerr := readHandshake(c, true)
		if rerr == nil {
			if why := certBinding(c, p.ID); why != "" {
				c.Close()
				s.id.refused("dial", addr, p, why)
				return nil, peerInfo{}, 0, "", fmt.Errorf("%w: %s", ErrRefused, why)
			}
			return c, p, second, reason, nil
		}
		c.Close()
		if err = rerr; !errors.Is(err, errNoHandshake) {
			break
		}
	}
	return nil, peerInfo{}, 0, "", err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (s *clusterStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, p, verdict, reason, err := s.hello(string(addr), kindRaft, timeout)
	if err != nil {
		return nil, err
	}
	me := s.id.self()
	if verdict != 0 {
		c.Close()
		s.id.refused("dial (refused by the peer)", string(addr), p, reason)
		return nil, fmt.Errorf("%w by %s at %s: %s", ErrRefused, p.ID, addr, reason)
	}
	if reason := s.id.check(p, string(addr)); reason != "" {
		c.Close()
		s.id.refused("dial", string(addr), p, reason)
		return nil, fmt.Errorf("%w: %s", ErrRefused, reason)
	}
	c.SetDeadline(time.Time{})
	return s.id.track(c, me.Cluster), nil
}

// certURIPrefix begins the URI SAN that names a node in a Raft certificate:
// ticketing://node/ID.
const certURIPrefix = "ticketing://node/"

// certBinding says why the TLS peer on c may not claim node id, or "" if it
// may: its certificate names id in its subject CN or in a URI SAN
// ticketing://node/ID. The certificate's chain was verified against the
// CA during the TLS handshake; this binds it to one server. Without TLS
// there is nothing to check (loopback, or raft_insecure).
func certBinding(c net.Conn, id string) string {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return ""
	}
	st := tc.ConnectionState()
	if len(st.PeerCertificates) == 0 {
		return "the peer presented no TLS certificate: with raft_tls every server presents one naming its node id, signed by the CA (raft_tls ca)"
	}
	cert := st.PeerCertificates[0]
	if certNamesNode(cert, id) {
		return ""
	}
	names := []string{"CN=" + cert.Subject.CommonName}
	for _, u := range cert.URIs {
		names = append(names, u.String())
	}
	return fmt.Sprintf("the peer claims node id %q but its certificate names %s: a server's Raft certificate names its own node id (CN, or URI SAN %s%s)",
		id, strings.Join(names, ", "), certURIPrefix, id)
}

func certNamesNode(cert *x509.Certificate, id string) bool {
	if id == "" {
		return false
	}
	if cert.Subject.CommonName == id {
		return true
	}
	for _, u := range cert.URIs {
		if u.String() == certURIPrefix+id {
			return true
		}
	}
	return false
}

// PeerState is what a server at a Raft address says about itself.
type PeerState struct {
	NodeID      string
	Cluster     fsm.ClusterID
	Empty       bool   // no Raft state: waiting to be added
	Settled     bool   // knows its cluster ID
	Incarnation uint64 // of its data directory; 0 if unknown (an older ticketd)
}

// Probe asks the server at addr who it is, without opening a Raft connection.
func (n *Node) Probe(addr string, timeout time.Duration) (PeerState, error) {
	c, p, _, _, err := n.stream.hello(addr, kindProbe, timeout)
	if err != nil {
		return PeerState{}, err
	}
	c.Close()
	return PeerState{NodeID: p.ID, Cluster: p.Cluster, Empty: p.State == stateEmpty, Settled: p.State == stateSettled, Incarnation: p.Incarnation}, nil
}

// watchLeadership gives a new cluster its ID as soon as it has a leader.
func (n *Node) watchLeadership() {
	for {
		select {
		case <-n.done:
			return
		case o := <-n.obsCh:
			if st, _ := o.Data.(raft.RaftState); st == raft.Leader {
				go n.ensureClusterID()
			}
		}
	}
}

// ensureClusterID: the leader of a cluster without an ID (a new cluster, or
// a data directory from before cluster IDs) sets one, and records as
// participants itself and the voters it has been connected to.
func (n *Node) ensureClusterID() {
	if n.cfg.Restoring || n.id.Cluster() != (fsm.ClusterID{}) {
		return
	}
	// Apply everything committed first: the log may already hold an ID.
	if err := n.raft.Barrier(10 * time.Second).Error(); err != nil || n.raft.State() != raft.Leader {
		return
	}
	n.fsm.mu.RLock()
	has := n.fsm.state.Cluster() != (fsm.ClusterID{})
	n.fsm.mu.RUnlock()
	if has {
		return
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	ops := []fsm.Op{{Kind: fsm.OpSetCluster, Cluster: NewClusterID()}, {Kind: fsm.OpAdmit, NodeID: n.cfg.ID, Incarnation: n.id.incarnation}}
	n.id.mu.Lock()
	if n.id.settledPeer != "" {
		peer, cluster := n.id.settledPeer, n.id.settledCluster
		n.id.mu.Unlock()
		// Setting an ID now would found a second history beside the one
		// that member holds, with tokens starting again from 1.
		n.cfg.Logger.Error("not setting a cluster ID: a member of this configuration already belongs to a cluster; this server waits to catch up from it",
			"peer", peer, "cluster", FormatClusterID(cluster))
		return
	}
	n.id.settling = true
	for _, s := range f.Configuration().Servers {
		if id := string(s.ID); id != n.cfg.ID {
			inc, met := n.id.seen[id]
			if !met {
				continue
			}
			// With its incarnation: should this leader fail before id
			// applied the ID, the next leader still recognises it (F7).
			ops = append(ops, fsm.Op{Kind: fsm.OpAdmit, NodeID: id, Incarnation: inc})
			n.id.admitting[id] = inc // accepted while they catch up with the ID
		}
	}
	n.id.mu.Unlock()
	b := fsm.Batch{Time: time.Now().UnixMilli(), Ops: ops}
	if err := n.raft.Apply(fsm.AppendBatch(nil, &b), 10*time.Second).Error(); err != nil {
		n.id.mu.Lock()
		n.id.settling = false
		n.id.mu.Unlock()
		n.cfg.Logger.Warn("could not set the cluster ID; the next leader will", "err", err)
	}
}

// Cluster returns this server's cluster ID (zero while it has none).
func (n *Node) Cluster() fsm.ClusterID { return n.id.Cluster() }

// Leads reports whether this server is the Raft leader of a cluster that
// has its ID. A leader without one (a new cluster's first moments, or a
// server that met a member of an established cluster and so never sets an
// ID) does not serve: grants are made only under the cluster's identity.
func (n *Node) Leads() bool {
	return n.raft.State() == raft.Leader && n.id.Cluster() != (fsm.ClusterID{})
}

// ErrJoinRefused reports a members add that would harm the cluster.
var ErrJoinRefused = errors.New("members add refused")

// PrepareJoin checks, on the leader, that the server at addr is id and is
// waiting with an empty data directory, then records it as a participant
// so that it is accepted while it catches up. Call it before AddVoter.
func (n *Node) PrepareJoin(id, addr string) error {
	if n.raft.State() != raft.Leader {
		return raft.ErrNotLeader
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return fmt.Errorf("%w: %s is already a member (at %s). If it lost its data, remove it first (ticketctl members remove %s), then add it back", ErrJoinRefused, id, s.Address, id)
		}
		if string(s.Address) == addr {
			return fmt.Errorf("%w: %s is already the address of member %s", ErrJoinRefused, addr, s.ID)
		}
	}
	p, err := n.Probe(addr, handshakeTimeout)
	if err != nil {
		return fmt.Errorf("%w: no ticketd answers at %s (%v): start %s first with an empty data directory and --join, and check the address (it is the server's raft_advertise address)", ErrJoinRefused, addr, err, id)
	}
	me := n.id.Cluster()
	switch {
	case p.NodeID != id:
		return fmt.Errorf("%w: the server at %s is %q, not %q: check the address, or add it under its own id", ErrJoinRefused, addr, p.NodeID, id)
	case p.Settled && p.Cluster != me:
		return fmt.Errorf("%w: %s at %s holds the data of cluster %s, and this is cluster %s: it must not bring another history in. "+
			"Stop it, empty its data directory, start it with --join, then run members add again", ErrJoinRefused, id, addr, FormatClusterID(p.Cluster), FormatClusterID(me))
	case !p.Empty:
		return fmt.Errorf("%w: %s at %s already holds Raft state (%s): a server is added with an empty data directory. "+
			"Stop it, empty its data directory, start it with --join, then run members add again", ErrJoinRefused, id, addr, FormatClusterID(p.Cluster))
	}
	b := fsm.Batch{Time: time.Now().UnixMilli(), Ops: []fsm.Op{{Kind: fsm.OpAdmit, NodeID: id, Incarnation: p.Incarnation}}}
	if err := n.raft.Apply(fsm.AppendBatch(nil, &b), handshakeTimeout).Error(); err != nil {
		return fmt.Errorf("record %s as a participant: %w", id, err)
	}
	n.id.expectJoin(id, p.Incarnation)
	return nil
}

// Forget drops a removed member from the participants (leader only).
func (n *Node) Forget(id string) error {
	b := fsm.Batch{Time: time.Now().UnixMilli(), Ops: []fsm.Op{{Kind: fsm.OpForget, NodeID: id}}}
	return n.raft.Apply(fsm.AppendBatch(nil, &b), handshakeTimeout).Error()
}
