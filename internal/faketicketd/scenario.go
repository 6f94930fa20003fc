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
	// Client is what a runner does, in order, and what it must see.
	Client []ClientStep `json:"client"`
	// Sent is what the client must and must not send.
	Sent SentCheck `json:"sent"`
}

// Step is one action of a connection's script. Exactly one of Hello, Read,
// Send, Raw, DelayMs, Stall, Cut, Reset and Serve is set. A script that
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
	// Raw writes bytes that are not a valid frame: "malformed",
	// "oversized", "unknown", or hex digits.
	Raw string `json:"raw,omitempty"`
	// DelayMs pauses the script (the server is slow, not silent).
	DelayMs int `json:"delay_ms,omitempty"`
	// Stall reads and records everything and answers nothing, pings
	// included, until the client hangs up.
	Stall bool `json:"stall,omitempty"`
	// Cut closes the connection; Reset ends it with a TCP reset.
	Cut   bool `json:"cut,omitempty"`
	Reset bool `json:"reset,omitempty"`
	// Serve answers every later request with the ordinary semantics (one
	// lock table per scenario, shared by its connections).
	Serve bool `json:"serve,omitempty"`

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
}

// HelloStep is the Y frame's content.
type HelloStep struct {
	IntervalMs  *uint32 `json:"interval_ms,omitempty"` // absent: 5000; 0: the server sends no pings
	MaxInFlight uint32  `json:"max_in_flight,omitempty"`
	Follower    bool    `json:"follower,omitempty"`
}

// ClientStep is one call a runner makes, and what it must return.
type ClientStep struct {
	Op       string `json:"op"` // acquire, release (the last acquired ticket), describe, close (the client)
	Key      string `json:"key,omitempty"`
	WaitMs   int64  `json:"wait_ms,omitempty"`
	LeaseMs  int64  `json:"lease_ms,omitempty"`
	BudgetMs int64  `json:"budget_ms,omitempty"`
	// CancelWhen cancels the call as soon as the server has received a
	// frame of this type (a letter): "A" cancels after the acquire was
	// sent, "H" before it could be.
	CancelWhen string `json:"cancel_when,omitempty"`
	Expect     Expect `json:"expect"`
	// WithinMs bounds the call, generously: it catches a hang, it does not
	// measure speed.
	WithinMs int64 `json:"within_ms,omitempty"`
}

// Expect is a call's outcome: a Result or an error class (see the README).
type Expect struct {
	Result string `json:"result,omitempty"` // granted, released, free, held
	Token  string `json:"token,omitempty"`  // granted: the ticket's token
	Error  string `json:"error,omitempty"`  // indeterminate, capacity, not_acquired, ...
}

// SentCheck is what the server must have received once the client steps
// are done.
type SentCheck struct {
	// Must lists frames that must arrive (within a few seconds of the
	// check: background releases may still be on their way).
	Must []FrameMatch `json:"must,omitempty"`
	// Count is the exact number of frames of each listed type.
	Count map[string]int `json:"count,omitempty"`
	// MustNot lists frame types the client must never send.
	MustNot []string `json:"must_not,omitempty"`
	// MaxConnections bounds the connections the client opened (0: no bound).
	MaxConnections int `json:"max_connections,omitempty"`
}

// FrameMatch selects received frames by type and, when set, token, key and
// nonce.
type FrameMatch struct {
	Type  string `json:"type"`
	Token string `json:"token,omitempty"`
	Key   string `json:"key,omitempty"`
	Nonce string `json:"nonce,omitempty"`
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
	for i, cs := range sc.Client {
		switch cs.Op {
		case "acquire", "release", "describe", "close":
		default:
			return fmt.Errorf("client step %d: unknown op %q", i, cs.Op)
		}
		if (cs.Expect.Result == "") == (cs.Expect.Error == "") {
			return fmt.Errorf("client step %d: expect a result or an error", i)
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
	for _, set := range []bool{st.Hello != nil, st.Read != "", st.Send != "", st.Raw != "", st.DelayMs != 0, st.Stall, st.Cut, st.Reset, st.Serve} {
		if set {
			n++
		}
	}
	if n != 1 {
		return errors.New("a step does exactly one thing")
	}
	for _, t := range []string{st.Read, st.Send} {
		if t != "" && len(t) != 1 {
			return fmt.Errorf("frame type %q is not one letter", t)
		}
	}
	for name, v := range map[string]string{"token": st.Token, "nonce": st.Nonce} {
		if v == "" {
			continue
		}
		if _, err := strconv.ParseUint(v, 10, 64); err != nil {
			return fmt.Errorf("%s %q: %w", name, v, err)
		}
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

// Received returns a copy of every frame read so far.
func (s *ScenarioServer) Received() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.received...)
}

// WaitFrame waits until a frame of type t (a letter) has been received, or
// until stop is closed or timeout has passed (false).
func (s *ScenarioServer) WaitFrame(t string, timeout time.Duration, stop <-chan struct{}) bool {
	return s.waitFor(timeout, stop, func(rs []Received) bool {
		for _, r := range rs {
			if r.Frame.Type.String() == t {
				return true
			}
		}
		return false
	})
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
	for _, t := range want.MustNot {
		if counts[t] > 0 {
			problems = append(problems, fmt.Sprintf("the client sent %d %s frames, want none", counts[t], t))
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

// handle runs the script of connection c.Index of server n.
func (s *ScenarioServer) handle(n int, c *Conn) {
	conns := s.sc.servers()[n]
	script := conns[min(c.Index, len(conns)-1)]
	var last wire.Frame // the last request read: answers echo its id
	read := func() (wire.Frame, error) {
		f, err := c.Read()
		if err == nil {
			s.record(n, c, f)
		}
		return f, err
	}
	for i, st := range script {
		switch {
		case st.Hello != nil:
			h, err := read()
			if err != nil {
				return
			}
			if h.Type != wire.TypeHello {
				s.violate("server %d connection %d: the first frame is %s, not H", n, c.Index, h.Type)
				return
			}
			r := Ready{MaxInFlight: st.Hello.MaxInFlight, Follower: st.Hello.Follower}
			if st.Hello.IntervalMs != nil {
				r.Interval = time.Duration(*st.Hello.IntervalMs) * time.Millisecond
				r.NoPings = *st.Hello.IntervalMs == 0
			}
			if c.Send(r.Frame()) != nil {
				return
			}
		case st.Read != "":
			var got wire.Frame
			for {
				f, err := read()
				if err != nil {
					return
				}
				if f.Type.String() == st.Read {
					got = f
					break
				}
				if f.Type == wire.TypePing {
					c.Send(wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})
				}
			}
			if got.Type != wire.TypePing && got.Type != wire.TypePong {
				last = got // pings and pongs answer nothing and are answered by nothing
			}
			want := FrameMatch{Type: st.Read, Token: st.Token, Key: st.Key, Nonce: st.Nonce}
			if !want.matches(got) {
				s.violate("server %d connection %d step %d: the client sent %s token %d key %q nonce %d, want %s",
					n, c.Index, i, got.Type, got.Token, got.Key, got.Nonce, want)
			}
		case st.Send != "":
			f := st.frame(last.ID)
			f.Text = []byte(serverRef.ReplaceAllStringFunc(st.Text, func(ref string) string {
				k, _ := strconv.Atoi(serverRef.FindStringSubmatch(ref)[1])
				return s.servers[k].Addr()
			}))
			c.Send(f)
			if f.Type == wire.TypeError || f.Type == wire.TypeNotLeader {
				c.Close()
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
		case st.Stall:
			for {
				if _, err := read(); err != nil {
					return
				}
			}
		case st.Cut:
			c.Close()
			return
		case st.Reset:
			_ = c.Reset() // the connection ends either way
			return
		case st.Serve:
			defer s.locks.Drop(c)
			for {
				f, err := read()
				if err != nil {
					return
				}
				s.locks.Handle(c, f)
			}
		}
	}
	// The script ran out: keep the connection, answering pings only.
	for {
		f, err := read()
		if err != nil {
			return
		}
		if f.Type == wire.TypePing {
			c.Send(wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})
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
