package ticketing

import (
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
	"github.com/ticketing-io/ticketing/internal/wire"
)

// docs/protocol.md, "Liveness": a server whose answer arrives slowly (a
// large answer on a slow link, its pings waiting behind it) is alive while
// its bytes arrive: the client does not give the connection up after 3
// ping intervals without a whole frame, and gets the answer.
func TestSlowAnswerBytesCountAsLife(t *testing.T) {
	srv := faketicketd.Start(t, func(c *faketicketd.Conn) {
		if _, err := c.AcceptHello(faketicketd.Ready{Interval: 20 * time.Millisecond}); err != nil {
			return
		}
		f, err := c.ReadType(wire.TypeDescribe)
		if err != nil {
			return
		}
		ans := wire.Append(nil, &wire.Frame{Type: wire.TypeInfo, ID: f.ID})
		// One byte every 15 ms: the whole frame takes many times the
		// client's 60 ms silence bound; no ping meanwhile.
		for i := range ans {
			if c.SendRaw(ans[i:i+1]) != nil {
				return
			}
			time.Sleep(15 * time.Millisecond) // the slow link under test
		}
		for {
			if _, err := c.Read(); err != nil {
				return
			}
		}
	})
	b := connect(t, srv.Addr())
	if _, err := b.Describe(ctxFor(t), "k"); err != nil {
		t.Fatalf("describe answered slowly: %v", err)
	}
	if n := srv.Accepted(); n != 1 {
		t.Fatalf("%d connections, want the first one kept", n)
	}
}
