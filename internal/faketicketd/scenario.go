package faketicketd

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// A Scenario is one file of the language-neutral conformance suite
// (testdata/conformance/*.json, described in its README.md): a script for
// this fake server, one list of steps per accepted connection, and the
// outcome every client must show. The server side is run here; the client
// steps are run by each language's runner against the server's address.
type Scenario struct {
	Name string `json:"name"`
	// Rule is the client rule the scenario checks, in words.
	Rule string `json:"rule"`
	// Connections[i] scripts the i-th accepted connection; connections
	// after the last script run the last one again.
	Connections [][]Step `json:"connections,omitempty"`
	// Servers, instead of Connections, scripts several servers: Servers[n]
	// is server n's Connections. The client is given every server's
	// address, in this order; a Send step's Text may name one as
	// "{server N}" (a leader hint in M, say).
	Servers [][][]Step `json:"servers,omitempty"`
	// Options are the client's settings, for rules about a bound or an
	// interval; absent, each runner's defaults (with a quick reconnect).
	Options ClientOptions `json:"options,omitempty"`
	// Client is what a runner does, in order, and what it must see.
	Client []ClientStep `json:"client"`
	// Sent is what the client must and must not send.
	Sent SentCheck `json:"sent"`
}

// ClientOptions are the client settings a scenario may set. Every client
// has each of them (some only for tests); zero leaves the runner's default.
type ClientOptions struct {
	// Addresses are the servers the client is given, by index, in order
	// (default: all of them).
	Addresses []int `json:"addresses,omitempty"`
	// ReleaseBoundMs bounds a release's retries of the exact token.
	ReleaseBoundMs int64 `json:"release_bound_ms,omitempty"`
	// ClientPingMs is the interval of the client's own pings, sent when
	// the server announces none.
	ClientPingMs int64 `json:"client_ping_ms,omitempty"`
	// AnswerGraceMs is the least time a request waits for its answer on a
	// live connection (an acquire: in addition to its wait).
	AnswerGraceMs int64 `json:"answer_grace_ms,omitempty"`
	// ConnectWaitMs bounds a call's wait for a connection (Go: the call's
	// context; Java: connectWait; C#: OperationTimeout).
	ConnectWaitMs int64 `json:"connect_wait_ms,omitempty"`
	// BackoffMs is the reconnect backoff, base and maximum alike.
	BackoffMs int64 `json:"backoff_ms,omitempty"`
	// ClusterID pins the client to this cluster from the start (Go
	// WithClusterID, Java clusterId, C# ClusterId): 32 hex digits.
	ClusterID string `json:"cluster_id,omitempty"`
}

// Step is one action of a connection's script. Exactly one of Hello, Read,
// Send, Raw, DelayMs, QuietMs, Stall, Cut, Reset and Serve is set. A script that
// runs out goes on reading (answering pings) until the client hangs up.
type Step struct {
	// Hello reads the client's H and answers Y.
	Hello *HelloStep `json:"hello,omitempty"`
	// Read reads frames until one of this type (a letter) arrives,
	// answering pings on the way. With Token or Key set the frame must
	// carry them; a mismatch fails the scenario's check.
	Read string `json:"read,omitempty"`
	// Send writes a frame of this type; its id is the last read request's.
	// After E or M the connection is closed, as a real server does.
	Send string `json:"send,omitempty"`
	// TrickleMs, with Send, writes the frame a byte at a time spread over
	// that long: a slow link, on which every byte is a sign of life though
	// the whole frame takes longer than the client's silence bound.
	TrickleMs int `json:"trickle_ms,omitempty"`
	// Raw writes bytes that are not a valid frame: "malformed",
	// "oversized", "unknown", or hex digits.
	Raw string `json:"raw,omitempty"`
	// DelayMs pauses the script (the server is slow, not silent).
	DelayMs int `json:"delay_ms,omitempty"`
	// QuietMs waits that long, answering pings; a request the client sends
	// meanwhile fails the check (an in-flight limit, say).
	QuietMs int `json:"quiet_ms,omitempty"`
	// Stall reads and records everything and answers nothing, pings
	// included, until the client hangs up.
	Stall bool `json:"stall,omitempty"`
	// Cut closes the connection; Reset ends it with a TCP reset.
	Cut   bool `json:"cut,omitempty"`
	Reset bool `json:"reset,omitempty"`
	// Serve answers every later request with the ordinary semantics (one
	// lock table per scenario, shared by its connections).
	Serve bool `json:"serve,omitempty"`
	// AnswerCoord answers every later K request of the connection with a T
	// of this status (0: SUCCESS with a zero body; otherwise the message
	// "refused by the script"), answering pings too.
	AnswerCoord *uint16 `json:"answer_coord,omitempty"`
	// KeepAlives, on a K read of another sub-op, answers each describe_node
	// read before the awaited request (a session's keep-alive, whose timing
	// is the client's) with a T of this status instead of taking it for the
	// step's request.
	KeepAlives *uint16 `json:"keep_alives,omitempty"`

	// Fields of a coordination frame (K read, T sent): Op is the sub-op by
	// name (coordOps), Session the session a K acts for or a T names,
	// SeqNo an attach answer's, Status a T's, Acquired an acquire answer's
	// flag; Token is an order id, Count a held count, Reason a session
	// end's, Key a semaphore's name and Text a refusal's message.
	Op       string `json:"op,omitempty"`
	Session  string `json:"session,omitempty"` // u64 as a decimal string
	SeqNo    uint64 `json:"seq_no,omitempty"`
	Status   uint16 `json:"status,omitempty"`
	Acquired bool   `json:"acquired,omitempty"`
	// Limit and Data are a describe-semaphore answer's limit and data
	// (text); Data in a K read is the data the request must carry.
	Limit uint64 `json:"limit,omitempty"`
	Data  string `json:"data,omitempty"`
	// TimeoutMsAtMost, in a read of a K acquire, bounds the queue timeout
	// it carries (one sent again carries only what is left).
	TimeoutMsAtMost *uint64 `json:"timeout_ms_at_most,omitempty"`

	// Fields of the frame to send, or to require of the frame read.
	Token    string `json:"token,omitempty"` // u64 as a decimal string
	Key      string `json:"key,omitempty"`
	LeaseMs  uint32 `json:"lease_ms,omitempty"`
	QueuedMs uint32 `json:"queued_ms,omitempty"`
	Count    uint32 `json:"count,omitempty"`
	Reason   uint8  `json:"reason,omitempty"`
	Code     uint16 `json:"code,omitempty"`
	Text     string `json:"text,omitempty"`
	Held     bool   `json:"held,omitempty"`  // I: the key is held
	Nonce    string `json:"nonce,omitempty"` // P, O: u64 as a decimal string
	// IDDelta is added to the id a Send answers (an id not in flight).
	IDDelta uint32 `json:"id_delta,omitempty"`
	// To makes a Send answer the last request read of this type, not the
	// last request read.
	To string `json:"to,omitempty"`
	// WaitS and LeaseS, in a Read of A, are the seconds it must carry.
	WaitS  *uint8 `json:"wait_s,omitempty"`
	LeaseS *uint8 `json:"lease_s,omitempty"`
}

// HelloStep is the Y frame's content.
type HelloStep struct {
	IntervalMs  *uint32 `json:"interval_ms,omitempty"` // absent: 5000; 0: the server sends no pings
	MaxInFlight uint32  `json:"max_in_flight,omitempty"`
	Follower    bool    `json:"follower,omitempty"`
	// Sessions announces ReadySessions: the server carries any number of
	// coordination sessions on one connection.
	Sessions bool `json:"sessions,omitempty"`
	// Pings makes the server ping at the interval, as a live server does,
	// for as long as the connection lasts (otherwise it only announces it).
	Pings bool `json:"pings,omitempty"`
	// ClusterID is the cluster ID the server reports to a hello that asks
	// for it: 32 hex digits, or "none" (it has none yet). Absent, it
	// reports none at all, as a server older than cluster IDs.
	ClusterID string `json:"cluster_id,omitempty"`
	// IdleIntervalMs is the idle ping interval announced to a hello that
	// asks for one (HelloIdlePings), as ticketd does; 0: none.
	IdleIntervalMs uint32 `json:"idle_interval_ms,omitempty"`
}

// cluster is the ID a HelloStep reports, nil for none at all.
func (h *HelloStep) cluster() (*wire.ClusterID, error) {
	var id wire.ClusterID
	switch h.ClusterID {
	case "":
		return nil, nil
	case "none":
		return &id, nil
	}
	b, err := hex.DecodeString(h.ClusterID)
	if err != nil || len(b) != wire.ClusterIDLen {
		return nil, fmt.Errorf("hello cluster_id %q: want %d hex digits or \"none\"", h.ClusterID, 2*wire.ClusterIDLen)
	}
	copy(id[:], b)
	return &id, nil
}

// ClientStep is one call a runner makes, and what it must return.
type ClientStep struct {
	// Op is acquire, release (the last acquired ticket), release_token
	// (Key, Token), describe, wait_ready (TimeoutMs), close (the client),
	// await (the outcome of the background call named Call),
	// await_frame (until the servers have received Count frames of Type)
	// or pause (PauseMs with no call: the client's connection is idle).
	Op    string `json:"op"`
	Key   string `json:"key,omitempty"`
	Token string `json:"token,omitempty"` // release_token: u64 as a decimal string
	// TimeoutMs is wait_ready's timeout.
	TimeoutMs int64 `json:"timeout_ms,omitempty"`
	// PauseMs is how long pause makes no call.
	PauseMs int64 `json:"pause_ms,omitempty"`
	// Type and Count are what await_frame waits for (Count 0: 1).
	Type  string `json:"type,omitempty"`
	Count int    `json:"count,omitempty"`
	// Background names a call that runs while the next steps do; an await
	// step with this Call checks its outcome. It has no Expect itself.
	Background string `json:"background,omitempty"`
	Call       string `json:"call,omitempty"`
	WaitMs     int64  `json:"wait_ms,omitempty"`
	LeaseMs    int64  `json:"lease_ms,omitempty"`
	BudgetMs   int64  `json:"budget_ms,omitempty"`
	// CancelWhen cancels the call as soon as the server has received a
	// frame of this type (a letter): "A" cancels after the acquire was
	// sent, "H" before it could be.
	CancelWhen string `json:"cancel_when,omitempty"`

	// Coordination calls (see the README): Path is a node's, Name a
	// semaphore's; PathBytes, NameBytes and DataBytes, when set, make a
	// path, name or data of that many bytes instead (for size rules).
	// SessionTimeoutMs is a session's timeout; Limit a created
	// semaphore's; Count (acquire_semaphore) the count to acquire,
	// Exclusive for all of it; WaitMs the acquire's queue timeout.
	Path             string `json:"path,omitempty"`
	Name             string `json:"name,omitempty"`
	PathBytes        int    `json:"path_bytes,omitempty"`
	NameBytes        int    `json:"name_bytes,omitempty"`
	DataBytes        int    `json:"data_bytes,omitempty"`
	SessionTimeoutMs int64  `json:"session_timeout_ms,omitempty"`
	Limit            uint64 `json:"limit,omitempty"`
	Exclusive        bool   `json:"exclusive,omitempty"`
	Ephemeral        bool   `json:"ephemeral,omitempty"`

	Expect Expect `json:"expect"`
	// WithinMs bounds the call, generously: it catches a hang, it does not
	// measure speed.
	WithinMs int64 `json:"within_ms,omitempty"`
}

// Expect is a call's outcome: a Result or an error class (see the README).
type Expect struct {
	Result string `json:"result,omitempty"` // granted, released, free, held
	Token  string `json:"token,omitempty"`  // granted: the ticket's token
	Error  string `json:"error,omitempty"`  // indeterminate, capacity, not_acquired, ...
	// Names are texts the error's message must contain (the two cluster
	// IDs of a wrong_cluster error, say).
	Names []string `json:"names,omitempty"`
}

// SentCheck is what the server must have received once the client steps
// are done.
type SentCheck struct {
	// Must lists frames that must arrive (within a few seconds of the
	// check: background releases may still be on their way).
	Must []FrameMatch `json:"must,omitempty"`
	// Count is the exact number of frames of each listed type.
	Count map[string]int `json:"count,omitempty"`
	// CoordCount is the exact number of K requests of each listed sub-op
	// (by name, coordOps).
	CoordCount map[string]int `json:"coord_count,omitempty"`
	// MustNot lists frame types the client must never send.
	MustNot []string `json:"must_not,omitempty"`
	// MaxConnections bounds the connections the client opened (0: no bound).
	MaxConnections int `json:"max_connections,omitempty"`
	// Accepted is the exact number of connections each server accepted.
	Accepted []int `json:"accepted,omitempty"`
	// HelloOrder is the servers the first hellos went to, in order (the
	// order in which the client dialed, and followed leader hints).
	HelloOrder []int `json:"hello_order,omitempty"`
}

// FrameMatch selects received frames by type and, when set, token, key and
// nonce.
type FrameMatch struct {
	Type string `json:"type"`
	// Op and Session select K frames by sub-op name (coordOps) and by the
	// session they act for.
	Op      string `json:"op,omitempty"`
	Session string `json:"session,omitempty"`

	Token  string `json:"token,omitempty"`
	Key    string `json:"key,omitempty"`
	Nonce  string `json:"nonce,omitempty"`
	WaitS  *uint8 `json:"wait_s,omitempty"`
	LeaseS *uint8 `json:"lease_s,omitempty"`
}

func (m FrameMatch) String() string {
	s := m.Type
	if m.Token != "" {
		s += " token " + m.Token
	}
	if m.Key != "" {
		s += " key " + strconv.Quote(m.Key)
	}
	if m.Nonce != "" {
		s += " nonce " + m.Nonce
	}
	if m.WaitS != nil {
		s += fmt.Sprintf(" wait %d s", *m.WaitS)
	}
	if m.LeaseS != nil {
		s += fmt.Sprintf(" lease %d s", *m.LeaseS)
	}
	if m.Op != "" {
		s += " " + m.Op
	}
	if m.Session != "" {
		s += " session " + m.Session
	}
	return s
}

func (m FrameMatch) matches(f wire.Frame) bool {
	if f.Type.String() != m.Type {
		return false
	}
	if m.Token != "" && strconv.FormatUint(f.Token, 10) != m.Token {
		return false
	}
	if m.Nonce != "" && strconv.FormatUint(f.Nonce, 10) != m.Nonce {
		return false
	}
	if m.WaitS != nil && f.Wait != *m.WaitS || m.LeaseS != nil && f.Lease != *m.LeaseS {
		return false
	}
	if m.Op != "" || m.Session != "" {
		op, session, ok := coordRequest(f)
		if !ok || m.Op != "" && coordOpName(op) != m.Op || m.Session != "" && strconv.FormatUint(session, 10) != m.Session {
			return false
		}
	}
	if f.Type == wire.TypeCoord {
		return m.Key == "" || coordRequestName(f) == m.Key // a K's key is the semaphore it names
	}
	return m.Key == "" || string(f.Key) == m.Key
}

// LoadScenario reads and checks one scenario file.
func LoadScenario(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sc Scenario
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := sc.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &sc, nil
}

// LoadScenarios reads every *.json file of dir, sorted by name.
func LoadScenarios(dir string) ([]*Scenario, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []*Scenario
	for _, p := range paths {
		sc, err := LoadScenario(p)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no scenarios in %s", dir)
	}
	return out, nil
}

func (sc *Scenario) validate() error {
	if sc.Name == "" || sc.Rule == "" {
		return errors.New("a scenario needs a name and a rule")
	}
	if (len(sc.Connections) == 0) == (len(sc.Servers) == 0) || len(sc.Client) == 0 {
		return errors.New("a scenario needs client steps and either connections or servers")
	}
	for n, conns := range sc.servers() {
		if len(conns) == 0 {
			return fmt.Errorf("server %d has no connection scripts", n)
		}
		for i, script := range conns {
			for j, st := range script {
				if err := st.validate(); err != nil {
					return fmt.Errorf("server %d connection %d step %d: %w", n, i, j, err)
				}
				if m := serverRef.FindStringSubmatch(st.Text); m != nil {
					if k, _ := strconv.Atoi(m[1]); k >= len(sc.servers()) {
						return fmt.Errorf("server %d connection %d step %d: there is no server %d", n, i, j, k)
					}
				}
			}
		}
	}
	background := map[string]bool{}
	for i, cs := range sc.Client {
		switch cs.Op {
		case "acquire", "release", "describe", "close", "wait_ready":
		case "session", "close_session", "create_node", "describe_node", "create_semaphore", "update_semaphore",
			"delete_semaphore", "acquire_semaphore", "release_semaphore", "lease_valid", "lease_ended",
			"mutex_lock", "mutex_try_lock", "election_campaign", "watch_semaphore":
		case "release_token":
			if _, err := strconv.ParseUint(cs.Token, 10, 64); err != nil {
				return fmt.Errorf("client step %d: release_token needs a token: %w", i, err)
			}
		case "await":
			if !background[cs.Call] {
				return fmt.Errorf("client step %d: no earlier background call %q", i, cs.Call)
			}
		case "await_frame":
			if len(cs.Type) != 1 {
				return fmt.Errorf("client step %d: await_frame needs a frame type", i)
			}
			continue
		case "pause":
			if cs.PauseMs <= 0 {
				return fmt.Errorf("client step %d: pause needs pause_ms", i)
			}
			continue
		default:
			return fmt.Errorf("client step %d: unknown op %q", i, cs.Op)
		}
		if cs.Background != "" {
			if cs.Op == "await" || background[cs.Background] {
				return fmt.Errorf("client step %d: background call %q named twice or awaiting", i, cs.Background)
			}
			background[cs.Background] = true
			if cs.Expect.Result != "" || cs.Expect.Token != "" || cs.Expect.Error != "" || len(cs.Expect.Names) > 0 {
				return fmt.Errorf("client step %d: a background call's outcome is checked by its await step", i)
			}
			continue
		}
		if (cs.Expect.Result == "") == (cs.Expect.Error == "") {
			return fmt.Errorf("client step %d: expect a result or an error", i)
		}
	}
	if id := sc.Options.ClusterID; id != "" {
		if b, err := hex.DecodeString(id); err != nil || len(b) != wire.ClusterIDLen {
			return fmt.Errorf("options: cluster_id %q is not %d hex digits", id, 2*wire.ClusterIDLen)
		}
	}
	for _, n := range sc.Options.Addresses {
		if n < 0 || n >= len(sc.servers()) {
			return fmt.Errorf("options: there is no server %d", n)
		}
	}
	for op := range sc.Sent.CoordCount {
		if _, ok := coordOps[op]; !ok {
			return fmt.Errorf("sent.coord_count: unknown coordination op %q", op)
		}
	}
	for _, m := range sc.Sent.Must {
		if _, ok := coordOps[m.Op]; m.Op != "" && !ok {
			return fmt.Errorf("sent.must: unknown coordination op %q", m.Op)
		}
	}
	if len(sc.Sent.Accepted) > 0 && len(sc.Sent.Accepted) != len(sc.servers()) {
		return errors.New("sent.accepted needs one count per server")
	}
	for _, n := range sc.Sent.HelloOrder {
		if n < 0 || n >= len(sc.servers()) {
			return fmt.Errorf("sent.hello_order: there is no server %d", n)
		}
	}
	return nil
}

// servers is the scripts of each server: Servers, or Connections as one.
func (sc *Scenario) servers() [][][]Step {
	if len(sc.Servers) > 0 {
		return sc.Servers
	}
	return [][][]Step{sc.Connections}
}

// serverRef is how a Send step's Text names a server's address.
var serverRef = regexp.MustCompile(`\{server (\d+)\}`)

func (st Step) validate() error {
	n := 0
	for _, set := range []bool{st.Hello != nil, st.Read != "", st.Send != "", st.Raw != "", st.DelayMs != 0, st.QuietMs != 0, st.Stall, st.Cut, st.Reset, st.Serve, st.AnswerCoord != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return errors.New("a step does exactly one thing")
	}
	if st.Hello != nil {
		if _, err := st.Hello.cluster(); err != nil {
			return err
		}
	}
	for _, t := range []string{st.Read, st.Send, st.To} {
		if t != "" && len(t) != 1 {
			return fmt.Errorf("frame type %q is not one letter", t)
		}
	}
	if err := st.validateCoord(); err != nil {
		return err
	}
	for name, v := range map[string]string{"token": st.Token, "nonce": st.Nonce, "session": st.Session} {
		if v == "" {
			continue
		}
		if _, err := strconv.ParseUint(v, 10, 64); err != nil {
			return fmt.Errorf("%s %q: %w", name, v, err)
		}
	}
	if st.TrickleMs < 0 || (st.TrickleMs != 0 && st.Send == "") {
		return errors.New("trickle_ms is a positive duration of a send step")
	}
	if st.Raw != "" {
		if _, err := rawBytes(st.Raw); err != nil {
			return err
		}
	}
	return nil
}

func rawBytes(s string) ([]byte, error) {
	switch s {
	case "malformed":
		return Malformed, nil
	case "oversized":
		return Oversized, nil
	case "unknown":
		return Unknown, nil
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("raw %q is neither a name nor hex", s)
	}
	return b, nil
}

// Received is one frame a server read, with the server and the connection
// it came on.
type Received struct {
	Server int
	Conn   int
	Frame  wire.Frame
}

// ScenarioServer serves one scenario (one or several servers) and records
// what the client sends.
type ScenarioServer struct {
	servers []*Server
	sc      *Scenario
	locks   *Locks // one lock table: the servers serve one cluster's state

	mu         sync.Mutex
	changed    chan struct{} // closed and replaced at every new frame
	received   []Received
	violations []string
	onFrame    func(Received)
}

// ServeScenario starts a server for sc on 127.0.0.1:0. onFrame, when not
// nil, is called for every frame received (the command prints them).
func ServeScenario(sc *Scenario, onFrame func(Received)) (*ScenarioServer, error) {
	s := &ScenarioServer{sc: sc, locks: NewLocks(), changed: make(chan struct{}), onFrame: onFrame}
	for n := range sc.servers() {
		srv, err := New(func(c *Conn) { s.handle(n, c) })
		if err != nil {
			s.Close()
			return nil, err
		}
		s.servers = append(s.servers, srv)
	}
	return s, nil
}

// Addr is the servers' addresses, comma-separated, in scenario order.
func (s *ScenarioServer) Addr() string {
	addrs := make([]string, len(s.servers))
	for i, srv := range s.servers {
		addrs[i] = srv.Addr()
	}
	return strings.Join(addrs, ",")
}

// Accepted is the number of connections accepted by all the servers.
func (s *ScenarioServer) Accepted() int {
	n := 0
	for _, srv := range s.servers {
		n += srv.Accepted()
	}
	return n
}

// Close stops the servers and the lock table.
func (s *ScenarioServer) Close() {
	for _, srv := range s.servers {
		srv.Close()
	}
	s.locks.Close()
}

func (s *ScenarioServer) record(server int, c *Conn, f wire.Frame) {
	r := Received{Server: server, Conn: c.Index, Frame: f}
	s.mu.Lock()
	s.received = append(s.received, r)
	close(s.changed)
	s.changed = make(chan struct{})
	cb := s.onFrame
	s.mu.Unlock()
	if cb != nil {
		cb(r)
	}
}

func (s *ScenarioServer) violate(format string, args ...any) {
	s.mu.Lock()
	s.violations = append(s.violations, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// Violations returns what the script found wrong so far (a frame that did
// not match, a request where the client had to wait).
func (s *ScenarioServer) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}

// Received returns a copy of every frame read so far.
func (s *ScenarioServer) Received() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.received...)
}

// WaitFrame waits until a frame of type t (a letter) has been received, or
// until stop is closed or timeout has passed (false).
func (s *ScenarioServer) WaitFrame(t string, timeout time.Duration, stop <-chan struct{}) bool {
	return s.WaitFrames(t, 1, timeout, stop)
}

// WaitFrames waits until n frames of type t have been received, or until
// stop is closed or timeout has passed (false).
func (s *ScenarioServer) WaitFrames(t string, n int, timeout time.Duration, stop <-chan struct{}) bool {
	return s.waitFor(timeout, stop, func(rs []Received) bool {
		seen := 0
		for _, r := range rs {
			if r.Frame.Type.String() == t {
				seen++
			}
		}
		return seen >= n
	})
}

// ClientAddr is the addresses the client is given: those of the servers
// the scenario's options name, or all, comma-separated.
func (s *ScenarioServer) ClientAddr() string {
	if len(s.sc.Options.Addresses) == 0 {
		return s.Addr()
	}
	addrs := make([]string, len(s.sc.Options.Addresses))
	for i, n := range s.sc.Options.Addresses {
		addrs[i] = s.servers[n].Addr()
	}
	return strings.Join(addrs, ",")
}

func (s *ScenarioServer) waitFor(timeout time.Duration, stop <-chan struct{}, cond func([]Received) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok, ch := cond(s.received), s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		case <-stop:
			return false
		}
	}
}

// Check compares what the client sent with the scenario's Sent, waiting up
// to timeout for the frames that must arrive. It returns nil or every
// difference.
func (s *ScenarioServer) Check(timeout time.Duration) error {
	want := s.sc.Sent
	s.waitFor(timeout, nil, func(rs []Received) bool {
		for _, m := range want.Must {
			if !anyMatch(rs, m) {
				return false
			}
		}
		return true
	})
	rs := s.Received()
	s.mu.Lock()
	problems := append([]string(nil), s.violations...)
	s.mu.Unlock()
	for _, m := range want.Must {
		if !anyMatch(rs, m) {
			problems = append(problems, "the client never sent "+m.String())
		}
	}
	counts := map[string]int{}
	for _, r := range rs {
		counts[r.Frame.Type.String()]++
	}
	types := make([]string, 0, len(want.Count))
	for t := range want.Count {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		if counts[t] != want.Count[t] {
			problems = append(problems, fmt.Sprintf("the client sent %d %s frames, want %d", counts[t], t, want.Count[t]))
		}
	}
	coordCounts := map[string]int{}
	for _, r := range rs {
		if op, _, ok := coordRequest(r.Frame); ok {
			coordCounts[coordOpName(op)]++
		}
	}
	ops := make([]string, 0, len(want.CoordCount))
	for op := range want.CoordCount {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		if coordCounts[op] != want.CoordCount[op] {
			problems = append(problems, fmt.Sprintf("the client sent %d K %s requests, want %d", coordCounts[op], op, want.CoordCount[op]))
		}
	}
	for _, t := range want.MustNot {
		if counts[t] > 0 {
			problems = append(problems, fmt.Sprintf("the client sent %d %s frames, want none", counts[t], t))
		}
	}
	if len(want.Accepted) > 0 {
		got := make([]int, len(s.servers))
		for i, srv := range s.servers {
			got[i] = srv.Accepted()
		}
		if fmt.Sprint(got) != fmt.Sprint(want.Accepted) {
			problems = append(problems, fmt.Sprintf("the servers accepted %v connections, want %v", got, want.Accepted))
		}
	}
	if len(want.HelloOrder) > 0 {
		var order []int
		for _, r := range rs {
			if r.Frame.Type == wire.TypeHello && len(order) < len(want.HelloOrder) {
				order = append(order, r.Server)
			}
		}
		if fmt.Sprint(order) != fmt.Sprint(want.HelloOrder) {
			problems = append(problems, fmt.Sprintf("the client's hellos went to servers %v, want %v", order, want.HelloOrder))
		}
	}
	if n := s.Accepted(); want.MaxConnections > 0 && n > want.MaxConnections {
		problems = append(problems, fmt.Sprintf("the client opened %d connections, want at most %d", n, want.MaxConnections))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func anyMatch(rs []Received, m FrameMatch) bool {
	for _, r := range rs {
		if m.matches(r.Frame) {
			return true
		}
	}
	return false
}

// handle runs the script of connection c.Index of server n. A reader
// goroutine records every frame as it arrives (what a runner's cancel_when
// and await_frame wait for) and hands it to the script.
func (s *ScenarioServer) handle(n int, c *Conn) {
	conns := s.sc.servers()[n]
	script := conns[min(c.Index, len(conns)-1)]
	frames := make(chan wire.Frame, 64)
	c.r.AllowCoordFrames() // K requests up to the coordination bound, as a server that serves coordination
	sessions := false      // the hello announced ReadySessions
	go func() {
		defer close(frames)
		for {
			f, err := c.Read()
			if err != nil {
				return
			}
			s.record(n, c, f)
			select {
			case frames <- f:
			case <-c.Done():
				return
			}
		}
	}()
	defer c.Close() // ends the reader once the script is done with the connection
	read := func() (wire.Frame, bool) {
		f, ok := <-frames
		return f, ok
	}
	pong := func(f wire.Frame) {
		if f.Type == wire.TypePing {
			c.Send(wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})
		}
		if f.Type == wire.TypeCoord {
			s.checkCoordForm(n, c.Index, f, sessions)
		}
	}
	var last wire.Frame                  // the last request read: answers echo its id
	lastOf := map[wire.Type]wire.Frame{} // the last request read of each type
	for i, st := range script {
		switch {
		case st.Hello != nil:
			h, ok := read()
			if !ok {
				return
			}
			if h.Type != wire.TypeHello {
				s.violate("server %d connection %d: the first frame is %s, not H", n, c.Index, h.Type)
				return
			}
			cluster, _ := st.Hello.cluster() // checked when the scenario was loaded
			r := Ready{MaxInFlight: st.Hello.MaxInFlight, Follower: st.Hello.Follower, Cluster: cluster, Sessions: st.Hello.Sessions,
				IdleInterval: time.Duration(st.Hello.IdleIntervalMs) * time.Millisecond}
			sessions = st.Hello.Sessions
			if st.Hello.IntervalMs != nil {
				r.Interval = time.Duration(*st.Hello.IntervalMs) * time.Millisecond
				r.NoPings = *st.Hello.IntervalMs == 0
			}
			if c.Send(r.FrameFor(h)) != nil {
				return
			}
			if st.Hello.Pings && r.Interval > 0 {
				go pingEvery(c, r.Interval)
			}
		case st.Read != "":
			var got wire.Frame
			for {
				f, ok := read()
				if !ok {
					return
				}
				if st.KeepAlives != nil && f.Type == wire.TypeCoord && st.Op != "describe_node" {
					if op, _, ok := coordRequest(f); ok && op == wire.CoordDescribeNode {
						c.Send(*coordAnswer(f, *st.KeepAlives))
						continue
					}
				}
				if f.Type.String() == st.Read {
					got = f
					break
				}
				pong(f)
			}
			if got.Type != wire.TypePing && got.Type != wire.TypePong {
				last = got // pings and pongs answer nothing and are answered by nothing
				lastOf[got.Type] = got
			}
			if got.Type == wire.TypeCoord {
				s.checkCoordForm(n, c.Index, got, sessions)
				want := FrameMatch{Type: st.Read, Op: st.Op, Session: st.Session, Key: st.Key}
				if !want.matches(got) {
					op, session, _ := coordRequest(got)
					s.violate("server %d connection %d step %d: the client sent K %s session %d name %q, want %s", n, c.Index, i, coordOpName(op), session, coordRequestName(got), want)
				}
				if st.Data != "" {
					if d, ok := coordRequestData(got); !ok || d != st.Data {
						s.violate("server %d connection %d step %d: the client sent K data %q, want %q", n, c.Index, i, d, st.Data)
					}
				}
				if st.TimeoutMsAtMost != nil {
					if t, ok := coordAcquireTimeout(got); !ok || t > *st.TimeoutMsAtMost {
						s.violate("server %d connection %d step %d: the client sent an acquire with a queue timeout of %d ms, want at most %d", n, c.Index, i, t, *st.TimeoutMsAtMost)
					}
				}
				continue
			}
			want := FrameMatch{Type: st.Read, Token: st.Token, Key: st.Key, Nonce: st.Nonce, WaitS: st.WaitS, LeaseS: st.LeaseS}
			if !want.matches(got) {
				s.violate("server %d connection %d step %d: the client sent %s token %d key %q nonce %d wait %d s lease %d s, want %s",
					n, c.Index, i, got.Type, got.Token, got.Key, got.Nonce, got.Wait, got.Lease, want)
			}
		case st.Send != "":
			answered := last
			if st.To != "" {
				answered = lastOf[wire.Type(st.To[0])]
			}
			if st.Send == wire.TypeCoordReply.String() {
				c.Send(*st.coordFrame(answered))
				continue
			}
			f := st.frame(answered.ID + st.IDDelta)
			f.Text = []byte(serverRef.ReplaceAllStringFunc(st.Text, func(ref string) string {
				k, _ := strconv.Atoi(serverRef.FindStringSubmatch(ref)[1])
				return s.servers[k].Addr()
			}))
			if st.TrickleMs > 0 {
				c.SendSlowly(wire.Append(nil, &f), time.Duration(st.TrickleMs)*time.Millisecond)
			} else {
				c.Send(f)
			}
			if f.Type == wire.TypeError || f.Type == wire.TypeNotLeader {
				return
			}
		case st.Raw != "":
			b, _ := rawBytes(st.Raw)
			c.SendRaw(b)
		case st.DelayMs != 0:
			select {
			case <-time.After(time.Duration(st.DelayMs) * time.Millisecond):
			case <-c.Done():
				return
			}
		case st.QuietMs != 0:
			quiet := time.After(time.Duration(st.QuietMs) * time.Millisecond)
		wait:
			for {
				select {
				case f, ok := <-frames:
					if !ok {
						return
					}
					if f.Type == wire.TypePing || f.Type == wire.TypePong {
						pong(f)
						continue
					}
					s.violate("server %d connection %d step %d: the client sent %s key %q while it had to wait",
						n, c.Index, i, f.Type, f.Key)
				case <-quiet:
					break wait
				}
			}
		case st.Stall:
			for {
				if _, ok := read(); !ok {
					return
				}
			}
		case st.Cut:
			return
		case st.Reset:
			_ = c.Reset() // the connection ends either way
			return
		case st.AnswerCoord != nil:
			for {
				f, ok := read()
				if !ok {
					return
				}
				pong(f)
				if f.Type == wire.TypeCoord {
					c.Send(*coordAnswer(f, *st.AnswerCoord))
				}
			}
		case st.Serve:
			defer s.locks.Drop(c)
			for {
				f, ok := read()
				if !ok {
					return
				}
				s.locks.Handle(c, f)
			}
		}
	}
	// The script ran out: keep the connection, answering pings only.
	for {
		f, ok := read()
		if !ok {
			return
		}
		pong(f)
	}
}

// pingEvery pings the client at the interval until the connection ends.
func pingEvery(c *Conn, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for nonce := uint64(1); ; nonce++ {
		select {
		case <-t.C:
			if c.Send(wire.Frame{Type: wire.TypePing, Nonce: nonce}) != nil {
				return
			}
		case <-c.Done():
			return
		}
	}
}

// frame is the frame a Send step writes, answering request id.
func (st Step) frame(id uint32) wire.Frame {
	token, _ := strconv.ParseUint(st.Token, 10, 64)
	nonce, _ := strconv.ParseUint(st.Nonce, 10, 64)
	f := wire.Frame{Type: wire.Type(st.Send[0]), ID: id, Token: token, Nonce: nonce, LeaseMs: st.LeaseMs, QueuedMs: st.QueuedMs,
		Count: st.Count, Reason: st.Reason, Code: st.Code, Text: []byte(st.Text), Key: []byte(st.Key)}
	if f.Type == wire.TypeInfo && st.Held {
		f.Flags = wire.InfoHeld
		f.Remaining = st.LeaseMs
	}
	return f
}
