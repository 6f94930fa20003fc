package crashtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/ticketing-io/ticketing/internal/adminwire"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// outcome classifies what a client learned about one request.
type outcome int

const (
	answered outcome = iota // a final answer arrived
	notSent                 // no connection: nothing was sent
	lost                    // sent (maybe), then the connection ended: indeterminate
	timedOut                // sent, no answer within the client's deadline: indeterminate, maybe still pending
)

func (o outcome) String() string {
	return [...]string{"answered", "not sent", "lost", "timed out"}[o]
}

const (
	dialTimeout = 6 * time.Second  // TCP + hello; a leader taking over may hold the hello for up to 5 s
	opTimeout   = 20 * time.Second // one request's final answer
)

// wclient is a byte-level client with exact bookkeeping: one request at a
// time, and for each request it says whether the answer is known. It follows
// M hints to the leader. It is not safe for concurrent use.
type wclient struct {
	addrs []string
	admin bool
	next  int
	hint  string
	nc    net.Conn
	rd    *wire.Reader
	id    uint32
	node  string // node id from Y
}

func newClient(addrs []string) *wclient { return &wclient{addrs: addrs} }

func (c *wclient) connected() bool { return c.nc != nil }

func (c *wclient) close() {
	if c.nc != nil {
		c.nc.Close()
		c.nc, c.rd = nil, nil
	}
}

// connect makes one attempt: to the last M hint if any, else to the next address.
func (c *wclient) connect() error {
	c.close()
	addr := c.hint
	c.hint = ""
	if addr == "" {
		addr = c.addrs[c.next%len(c.addrs)]
		c.next++
	}
	nc, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		return err
	}
	var flags uint8
	if c.admin {
		flags = wire.HelloAdmin
	}
	nc.SetDeadline(time.Now().Add(dialTimeout))
	if _, err := nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypeHello, Version: wire.Version, Flags: flags})); err != nil {
		nc.Close()
		return err
	}
	rd := wire.NewReader(nc)
	for {
		var f wire.Frame
		if err := rd.Next(&f); err != nil {
			nc.Close()
			return fmt.Errorf("hello to %s: %w", addr, err)
		}
		switch f.Type {
		case wire.TypePing:
			nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypePong, Nonce: f.Nonce}))
			continue
		case wire.TypeReady:
			nc.SetDeadline(time.Time{})
			c.nc, c.rd, c.node = nc, rd, string(f.Text)
			return nil
		case wire.TypeNotLeader:
			c.hint = string(f.Text)
			nc.Close()
			return fmt.Errorf("%s is not the leader (hint %q)", addr, f.Text)
		default:
			nc.Close()
			return fmt.Errorf("hello to %s: got %s code %d %q", addr, f.Type, f.Code, f.Text)
		}
	}
}

// errProtocol marks an answer that breaks the protocol (a test failure).
var errProtocol = errors.New("protocol violation")

// do sends f (with a fresh id) and waits for its final answer.
func (c *wclient) do(f *wire.Frame) (wire.Frame, outcome, error) {
	if c.nc == nil {
		return wire.Frame{}, notSent, errors.New("not connected")
	}
	c.id++
	f.ID = c.id
	c.nc.SetWriteDeadline(time.Now().Add(opTimeout))
	if _, err := c.nc.Write(wire.Append(nil, f)); err != nil {
		c.close()
		return wire.Frame{}, lost, err
	}
	c.nc.SetReadDeadline(time.Now().Add(opTimeout))
	for {
		var g wire.Frame
		if err := c.rd.Next(&g); err != nil {
			c.close()
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return wire.Frame{}, timedOut, err
			}
			return wire.Frame{}, lost, err
		}
		switch g.Type {
		case wire.TypePing:
			c.nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypePong, Nonce: g.Nonce}))
			continue
		case wire.TypePong:
			continue
		case wire.TypeNotLeader:
			c.hint = string(g.Text)
			c.close()
			return wire.Frame{}, lost, fmt.Errorf("M (leader %q)", g.Text)
		case wire.TypeError:
			c.close()
			return wire.Frame{}, lost, fmt.Errorf("E code %d: %s", g.Code, g.Text)
		case wire.TypeQueued:
			if g.ID == f.ID {
				continue
			}
		}
		if g.ID != f.ID {
			c.close()
			return wire.Frame{}, lost, fmt.Errorf("%w: %s for request %d while waiting for %d", errProtocol, g.Type, g.ID, f.ID)
		}
		g.Key = append([]byte(nil), g.Key...)
		g.Text = append([]byte(nil), g.Text...)
		return g, answered, nil
	}
}

// status is the admin status answer.
type status = adminwire.Status

// adminDo runs one admin request on a fresh admin session with addr.
func adminDo(addr, req string) (uint16, []byte, error) {
	c := &wclient{addrs: []string{addr}, admin: true}
	defer c.close()
	if err := c.connect(); err != nil {
		return 0, nil, err
	}
	f, o, err := c.do(&wire.Frame{Type: wire.TypeAdmin, Text: []byte(req)})
	if o != answered {
		return 0, nil, fmt.Errorf("admin %s: %v (%v)", req, o, err)
	}
	if f.Type != wire.TypeAdminReply {
		return 0, nil, fmt.Errorf("admin %s: got %s", req, f.Type)
	}
	return f.Code, f.Text, nil
}

func adminStatus(addr string) (status, error) {
	var st status
	code, body, err := adminDo(addr, `{"op":"status"}`)
	if err != nil {
		return st, err
	}
	if code != adminwire.StatusOK {
		return st, fmt.Errorf("status: code %d %s", code, body)
	}
	err = adminwire.Decode("the status answer", body, &st)
	return st, err
}

// serves reports whether addr answers a client hello with Y (a serving leader).
func serves(addr string) bool {
	c := &wclient{addrs: []string{addr}}
	defer c.close()
	return c.connect() == nil
}
