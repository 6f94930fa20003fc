package coordination_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// TestRequestEndingConnectionsNotResentForever: a server (scripted: an
// older one, say) that ends the connection with E whenever it receives a
// certain acquire gets it twice, not in an endless restore-and-resend loop;
// the acquire fails to its caller with ErrIndeterminate, and the session
// stays usable.
func TestRequestEndingConnectionsNotResentForever(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var acquires, attaches atomic.Int32
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				r := wire.NewReader(nc)
				var f wire.Frame
				if r.Next(&f) != nil || f.Type != wire.TypeHello {
					return
				}
				nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypeReady, Version: wire.Version, Flags: wire.ReadyLeader, Interval: 5000, Count: 64, Text: []byte("fake")}))
				r.AllowCoordFrames()
				for r.Next(&f) == nil {
					if f.Type != wire.TypeCoord {
						continue
					}
					var req wire.Coord
					if wire.DecodeCoord(&f, &req) != nil {
						return
					}
					switch f.Op {
					case wire.CoordAttach:
						attaches.Add(1)
						nc.Write(wire.Append(nil, wire.CoordFrame(true, f.ID, f.Op, wire.CoordSuccess, &wire.Coord{Session: 1, SeqNo: req.SeqNo})))
					case wire.CoordAcquire:
						acquires.Add(1)
						nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypeError, Code: uint16(wire.CodeFrameTooLarge), Text: []byte("refused")}))
						return
					default:
						nc.Write(wire.Append(nil, wire.CoordFrame(true, f.ID, f.Op, wire.CoordSuccess, &wire.Coord{})))
					}
				}
			}()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newClient(t, ln.Addr().String())
	s, err := c.Session(ctx, "/n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireSemaphore(ctx, "s"); !errors.Is(err, coordination.ErrIndeterminate) {
		t.Fatalf("acquire that ends every connection: %v, want ErrIndeterminate", err)
	}
	if n := acquires.Load(); n != 2 {
		t.Fatalf("the acquire was sent %d times, want 2", n)
	}
	if err := s.CreateSemaphore(ctx, "t", 1, nil); err != nil {
		t.Fatalf("the session after the refused acquire: %v", err)
	}
}
