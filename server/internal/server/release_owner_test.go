package server_test

import (
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// releaseOwner sends U and returns its id.
func releaseOwner(t *testing.T, r *testcluster.Raw, key string, owner wire.Owner) uint32 {
	t.Helper()
	id := r.ID()
	r.Send(&wire.Frame{Type: wire.TypeReleaseOwner, ID: id, Owner: owner, Key: []byte(key)})
	return id
}

// A release by owner ends exactly that owner's hold, from any connection,
// and answers N for another owner, another key or a free key.
func TestReleaseOwnerEndsOnlyThatOwnersHold(t *testing.T) {
	c := testcluster.Start(t, 1)
	a := testcluster.Hello(t, c.Addr(0), "")
	o1, o2 := testcluster.Owner(1), testcluster.Owner(2)
	g := expect(t, a.Final(a.Acquire("k", o1, 0, 30)), wire.TypeGranted)
	expect(t, a.Final(a.Acquire("j", o2, 0, 30)), wire.TypeGranted)
	a.Conn.Close() // as after an indeterminate acquire: the client reconnects

	b := testcluster.Hello(t, c.Addr(0), "")
	expect(t, b.Final(releaseOwner(t, b, "k", o2)), wire.TypeNotHeld)    // another owner's hold
	expect(t, b.Final(releaseOwner(t, b, "free", o1)), wire.TypeNotHeld) // a free key
	if d := describe(t, b, "k"); d.Flags != 1 || d.Token != g.Token {
		t.Fatalf("a release by another owner touched the hold: %+v", d)
	}
	expect(t, b.Final(releaseOwner(t, b, "k", o1)), wire.TypeReleased)
	if d := describe(t, b, "k"); d.Flags != 0 {
		t.Fatalf("still held after the release by its owner: %+v", d)
	}
	expect(t, b.Final(releaseOwner(t, b, "k", o1)), wire.TypeNotHeld) // ended once
	expect(t, b.Final(b.Release("k", g.Token)), wire.TypeNotHeld)
	if d := describe(t, b, "j"); d.Flags != 1 {
		t.Fatalf("j lost its hold: %+v", d)
	}
	// The freed key is granted again with a larger token.
	g2 := expect(t, b.Final(b.Acquire("k", testcluster.Owner(3), 0, 30)), wire.TypeGranted)
	if g2.Token <= g.Token {
		t.Fatalf("token %d after %d", g2.Token, g.Token)
	}
}

// A release by the holder's owner hands the key to the head waiter, as a
// release by token does.
func TestReleaseOwnerHandsOffToTheNextWaiter(t *testing.T) {
	c := testcluster.Start(t, 1)
	a := testcluster.Hello(t, c.Addr(0), "")
	g := expect(t, a.Final(a.Acquire("k", testcluster.Owner(1), 0, 200)), wire.TypeGranted)
	w := testcluster.Hello(t, c.Addr(0), "")
	id := w.Acquire("k", testcluster.Owner(2), 30, 30)
	expect(t, w.Recv(), wire.TypeQueued)
	expect(t, a.Final(releaseOwner(t, a, "k", testcluster.Owner(1))), wire.TypeReleased)
	if gw := expect(t, w.Final(id), wire.TypeGranted); gw.Token <= g.Token {
		t.Fatalf("waiter's token %d not above %d", gw.Token, g.Token)
	}
}

// A release by owner withdraws that owner's waiter queued on the key: its
// acquire is answered X on its (still open) connection, and the key's queue
// no longer holds it. The hold of another owner is untouched (N).
func TestReleaseOwnerWithdrawsItsQueuedWaiter(t *testing.T) {
	c := testcluster.Start(t, 1)
	a := testcluster.Hello(t, c.Addr(0), "")
	g := expect(t, a.Final(a.Acquire("k", testcluster.Owner(1), 0, 200)), wire.TypeGranted)
	w := testcluster.Hello(t, c.Addr(0), "")
	o2 := testcluster.Owner(2)
	id := w.Acquire("k", o2, 60, 30)
	expect(t, w.Recv(), wire.TypeQueued)
	other := w.Acquire("k", testcluster.Owner(3), 60, 30)
	expect(t, w.Recv(), wire.TypeQueued)

	u := testcluster.Hello(t, c.Addr(0), "")
	expect(t, u.Final(releaseOwner(t, u, "j", o2)), wire.TypeNotHeld) // another key: the waiter stays
	if d := describe(t, u, "k"); d.Count != 2 {
		t.Fatalf("%d waiters after a release by owner of another key, want 2", d.Count)
	}
	expect(t, u.Final(releaseOwner(t, u, "k", o2)), wire.TypeNotHeld) // o2 holds nothing
	if f := w.Recv(); f.Type != wire.TypeCancelled || f.ID != id {
		t.Fatalf("the withdrawn waiter's acquire got %s for %d, want X for %d", f.Type, f.ID, id)
	}
	if d := describe(t, u, "k"); d.Count != 1 || d.Token != g.Token {
		t.Fatalf("after the withdrawal: %+v, want the hold kept and 1 waiter", d)
	}
	expect(t, a.Final(a.Release("k", g.Token)), wire.TypeReleased)
	expect(t, w.Final(other), wire.TypeGranted)
}

// A release by owner that arrives while that owner's acquire is being
// committed ends the grant if it is made, and the acquire is then answered
// X, never G: nobody is told it holds a key that is free.
func TestReleaseOwnerDuringTheAttempt(t *testing.T) {
	c := testcluster.Start(t, 1)
	r := testcluster.Hello(t, c.Addr(0), "")
	withdrawn := 0
	for i := range 10 {
		o := testcluster.Owner(100 + i)
		aid := r.ID()
		uid := r.ID()
		// One write: the release follows the acquire long before the
		// acquire's entry can be committed.
		b := wire.Append(nil, &wire.Frame{Type: wire.TypeAcquire, ID: aid, Owner: o, Wait: 5, Lease: 200, Key: []byte("k")})
		b = wire.Append(b, &wire.Frame{Type: wire.TypeReleaseOwner, ID: uid, Owner: o, Key: []byte("k")})
		r.SendBytes(b)
		got := map[uint32]wire.Frame{}
		for len(got) < 2 {
			f := r.Recv()
			if f.Type == wire.TypeQueued {
				continue
			}
			got[f.ID] = f
		}
		switch fa, fu := got[aid], got[uid]; {
		case fa.Type == wire.TypeCancelled && fu.Type == wire.TypeReleased:
			withdrawn++
		case fa.Type == wire.TypeGranted && fu.Type == wire.TypeReleased:
			// The grant was applied before the release arrived: ended by it.
		default:
			t.Fatalf("round %d: acquire answered %s, release by owner %s", i, fa.Type, fu.Type)
		}
		if d := describe(t, r, "k"); d.Flags != 0 || d.Count != 0 {
			t.Fatalf("round %d: key not free after the release by owner: %+v", i, d)
		}
	}
	if withdrawn == 0 {
		t.Fatal("no release by owner arrived while its acquire was committing; the test did not exercise that case")
	}
}

// An admin session on a follower serves status only: U is refused there
// like the other ticket requests; an empty key is an invalid argument.
func TestReleaseOwnerOnAdminFollowerSessionNotAllowed(t *testing.T) {
	c := testcluster.Start(t, 3)
	leader := c.LeaderIndex(t)
	f := (leader + 1) % 3
	r := testcluster.DialRaw(t, c.Addr(f))
	r.Send(&wire.Frame{Type: wire.TypeHello, Version: wire.Version, Flags: wire.HelloAdmin})
	expect(t, r.Recv(), wire.TypeReady)
	releaseOwner(t, r, "k", testcluster.Owner(1))
	expectFatal(t, r, wire.CodeNotAllowed)

	l := testcluster.Hello(t, c.Addr(leader), "")
	l.Send(&wire.Frame{Type: wire.TypeReleaseOwner, ID: 1, Owner: testcluster.Owner(1)})
	expectFatal(t, l, wire.CodeInvalidArgument)
}
