package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

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
