package clienttest

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ticketing "github.com/ticketing-io/ticketing"

	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// stallProxy is a fault-injecting TCP proxy in front of a real server. It
// forwards everything, except that a stalled connection holds back every
// frame from the server (so the client never sees the answer), and Drop cuts
// every connection: a final answer lost with the connection. Stall applies
// to the connections open when it is called; a connection made after a Drop
// is never stalled, however quickly the client dials again.
type stallProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []*proxied
	wg     sync.WaitGroup
}

type proxied struct {
	client, server net.Conn
	stalled        atomic.Bool
}

func startStallProxy(t *testing.T, target string) *stallProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.Drop()
		p.wg.Wait()
	})
	return p
}

func (p *stallProxy) Addr() string { return p.ln.Addr().String() }

func (p *stallProxy) accept() {
	defer p.wg.Done()
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			return
		}
		sc, err := net.Dial("tcp", p.target)
		if err != nil {
			cc.Close()
			continue
		}
		pc := &proxied{client: cc, server: sc}
		p.mu.Lock()
		p.conns = append(p.conns, pc)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { // client -> server, as is
			defer p.wg.Done()
			io.Copy(sc, cc)
			sc.Close()
		}()
		go func() { // server -> client, frame by frame
			defer p.wg.Done()
			defer cc.Close()
			hdr := make([]byte, 4)
			for {
				if _, err := io.ReadFull(sc, hdr); err != nil {
					return
				}
				body := make([]byte, binary.BigEndian.Uint32(hdr))
				if _, err := io.ReadFull(sc, body); err != nil {
					return
				}
				if pc.stalled.Load() {
					continue // held back, then lost with the connection
				}
				if _, err := cc.Write(append(hdr, body...)); err != nil {
					return
				}
			}
		}()
	}
}

// Stall holds back, from now on, every frame the server sends on the
// connections open now.
func (p *stallProxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.stalled.Store(true)
	}
}

// Drop cuts every connection made so far.
func (p *stallProxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.client.Close()
		c.server.Close()
	}
	p.conns = nil
}

// An acquire whose connection ends before its final answer is
// indeterminate, with the key and owner in the error; a grant it received
// is ended by the client's release by owner (U) once it reconnects, not
// kept for its whole lease. The same holds for an acquire cancelled after it
// was sent whose connection ends before the answer.
func TestIndeterminateAcquireIsReleasedByOwner(t *testing.T) {
	cl := testcluster.Start(t, 1)
	p := startStallProxy(t, cl.Addr(0))
	b := connect(t, p.Addr())
	direct := connect(t, cl.AddrList()) // sees the server's state
	ctx := ctxFor(t)
	if err := b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	// heldBy waits until key is held and returns its holder's owner.
	heldBy := func(t *testing.T, key string) [16]byte {
		var d ticketing.Description
		testcluster.WaitFor(t, patience, key+" is granted at the server", func() bool {
			var err error
			d, err = direct.Describe(ctx, key)
			return err == nil && d.Held
		})
		return d.Owner
	}
	freed := func(t *testing.T, key string) {
		t.Helper()
		testcluster.WaitFor(t, patience, key+" is free again (long before its 200 s lease)", func() bool {
			d, err := direct.Describe(ctx, key)
			return err == nil && !d.Held
		})
		tk, err := direct.Acquire(ctx, key, 0, 10*time.Second, 0)
		if err != nil {
			t.Fatalf("acquire of %s after the release by owner: %v", key, err)
		}
		tk.Release(ctx)
	}

	t.Run("answer lost", func(t *testing.T) {
		p.Stall()
		got := make(chan error, 1)
		go func() {
			_, err := b.Acquire(ctx, "orphan", 0, 200*time.Second, 0)
			got <- err
		}()
		owner := heldBy(t, "orphan")
		p.Drop()
		err := <-got
		var ie *ticketing.IndeterminateError
		if !errors.Is(err, ticketing.ErrIndeterminate) || !errors.As(err, &ie) {
			t.Fatalf("acquire whose answer was lost: %v, want an *IndeterminateError", err)
		}
		if ie.Key != "orphan" || ie.Owner != owner {
			t.Errorf("error carries key %q owner %x, want %q %x (the holder's)", ie.Key, ie.Owner, "orphan", owner)
		}
		freed(t, "orphan")
	})
	t.Run("cancelled after send", func(t *testing.T) {
		// The acquire must go out on a connection that is stalled, not on
		// one made after it.
		if err := b.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		p.Stall()
		cctx, cancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() {
			_, err := b.Acquire(cctx, "orphan2", 0, 200*time.Second, 0)
			got <- err
		}()
		heldBy(t, "orphan2")
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled acquire: %v", err)
		}
		p.Drop() // the G never reached the client
		freed(t, "orphan2")
	})
}
