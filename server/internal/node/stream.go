package node

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
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
// cluster handshake on every connection. Without a listener (ln nil: a
// server without peer authentication, running alone) it accepts and dials
// nothing.
type clusterStream struct {
	ln  net.Listener
	adv net.Addr
	tls *tls.Config
	id  *identity
	// auth is the cluster secret's part of the handshake; clusterName,
	// when set, is the cluster a Raft certificate must name.
	auth        peerAuth
	clusterName string

	accepted chan net.Conn
	closed   chan struct{}
	once     sync.Once
}

func newClusterStream(ln net.Listener, adv net.Addr, t *tls.Config, id *identity, auth peerAuth, clusterName string) *clusterStream {
	s := &clusterStream{ln: ln, adv: adv, tls: t, id: id, auth: auth, clusterName: clusterName, accepted: make(chan net.Conn), closed: make(chan struct{})}
	if ln != nil {
		go s.acceptLoop()
	}
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
	var hello bytes.Buffer // the proofs of the cluster secret cover the hello as sent
	p, kind, _, err := readHandshake(io.TeeReader(c, &hello), false)
	if err != nil {
		// Not a ticketd, or one that gave up: at most one line a minute
		// (the key leaves out the error text, which names the address).
		s.id.refusedKey("accept", raw.RemoteAddr().String(), peerInfo{ID: "?"}, "no valid handshake: "+err.Error(), "?|no valid handshake")
		c.Close()
		return
	}
	if reason := s.auth.accept(c, s.id.nodeID, p, hello.Bytes()); reason != "" {
		// Refused before the peer proved anything: the reply says nothing
		// about this server, and nothing of the peer reaches Raft.
		_, _ = c.Write(appendReply(nil, true, peerInfo{Version: p.Version}, reason))
		s.id.refused("accept", raw.RemoteAddr().String(), p, reason)
		c.Close()
		return
	}
	me := s.id.self()
	me.Version = p.Version // an older dialer reads only its own version
	reason := certBinding(c, p.ID, s.clusterName)
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
	s.id.metRelease(p)
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
	if s.ln == nil {
		return nil
	}
	return s.ln.Close()
}

func (s *clusterStream) Addr() net.Addr { return s.adv }

func (s *clusterStream) dial(addr string, timeout time.Duration) (net.Conn, error) {
	if s.ln == nil {
		return nil, ErrNoRaftListener
	}
	d := &net.Dialer{Timeout: timeout}
	if s.tls == nil {
		return d.Dial("tcp", addr)
	}
	return tls.DialWithDialer(d, "tcp", addr, s.tls)
}

// hello dials addr and exchanges hellos (and, with a cluster secret, the
// proofs of it): in the current version, and once more in each older
// version if the peer closed the connection unanswered (an older ticketd
// that does not read the newer one), unless this server requires the
// secret, which older versions cannot prove. A probe that the peer refused
// is an error.
func (s *clusterStream) hello(addr string, kind byte, timeout time.Duration) (net.Conn, peerInfo, byte, string, error) {
	var err error
	for _, v := range []byte{handshakeVersion, handshakeVersionV3, handshakeVersionV2, handshakeVersionV1} {
		if v < 3 && !s.auth.fallBack() {
			return nil, peerInfo{}, 0, "", fmt.Errorf("%w: the server at %s closed the connection without answering: it runs an older ticketd, which cannot prove the cluster secret; upgrade it (docs/deployment.md, rolling upgrade)", ErrRefused, addr)
		}
		var c net.Conn
		if c, err = s.dial(addr, timeout); err != nil {
			return nil, peerInfo{}, 0, "", err
		}
		me := s.id.self()
		me.Version = v
		if v >= 3 {
			me.Auth, me.Nonce = s.auth.auth(), newNonce()
		}
		c.SetDeadline(time.Now().Add(max(timeout, handshakeTimeout)))
		hello := appendHello(nil, kind, me)
		if _, err = c.Write(hello); err != nil {
			c.Close()
			return nil, peerInfo{}, 0, "", err
		}
		p, second, reason, ch, rerr := readAnswer(c)
		if rerr == nil {
			p, second, reason, rerr = s.auth.dialed(c, hello, p, second, reason, ch)
			if rerr != nil {
				c.Close()
				s.id.refused("dial", addr, p, rerr.Error())
				return nil, peerInfo{}, 0, "", rerr
			}
			if kind == kindProbe && second != 0 {
				c.Close()
				return nil, peerInfo{}, 0, "", fmt.Errorf("%w by the server at %s: %s", ErrRefused, addr, reason)
			}
			if why := certBinding(c, p.ID, s.clusterName); why != "" && second == 0 {
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
	s.id.metRelease(p)
	return s.id.track(c, me.Cluster), nil
}

// certURIPrefix begins the URI SAN that names a node in a Raft certificate:
// ticketing://node/ID, or with a cluster name ticketing://NAME/node/ID.
const (
	certURIPrefix = "ticketing://node/"
	certURIScheme = "ticketing://"
)

// certURI is the URI SAN naming node id of cluster name ("" for none).
func certURI(cluster, id string) string {
	if cluster == "" {
		return certURIPrefix + id
	}
	return certURIScheme + cluster + "/node/" + id
}

// certBinding says why the TLS peer on c may not claim node id, or "" if it
// may: its certificate names id in its subject CN or in a URI SAN
// ticketing://node/ID; with a cluster name, only in the URI SAN
// ticketing://NAME/node/ID, so that a certificate from the same CA for a
// server of another cluster is refused. The certificate's chain was
// verified against the CA during the TLS handshake; this binds it to one
// server. Without TLS there is nothing to check (the cluster secret, or
// raft_insecure).
func certBinding(c net.Conn, id, cluster string) string {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return ""
	}
	st := tc.ConnectionState()
	if len(st.PeerCertificates) == 0 {
		return "the peer presented no TLS certificate: with raft_tls every server presents one naming its node id, signed by the CA (raft_tls ca)"
	}
	cert := st.PeerCertificates[0]
	if certNamesNode(cert, id, cluster) {
		return ""
	}
	names := []string{"CN=" + cert.Subject.CommonName}
	for _, u := range cert.URIs {
		names = append(names, u.String())
	}
	if cluster != "" {
		return fmt.Sprintf("the peer claims node id %q of cluster %q but its certificate names %s: with cluster_name = %q a server's Raft certificate carries the URI SAN %s (a certificate for another cluster signed by the same CA is refused)",
			id, cluster, strings.Join(names, ", "), cluster, certURI(cluster, id))
	}
	return fmt.Sprintf("the peer claims node id %q but its certificate names %s: a server's Raft certificate names its own node id (CN, or URI SAN %s)",
		id, strings.Join(names, ", "), certURI("", id))
}

func certNamesNode(cert *x509.Certificate, id, cluster string) bool {
	if id == "" {
		return false
	}
	if cluster == "" && cert.Subject.CommonName == id {
		return true
	}
	want := certURI(cluster, id)
	for _, u := range cert.URIs {
		if u.String() == want {
			return true
		}
	}
	return false
}
