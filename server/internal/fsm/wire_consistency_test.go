package fsm

import (
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// TestCoordStatusesMatchFSM: the wire numbers are the state machine's.
func TestCoordStatusesMatchFSM(t *testing.T) {
	for s := uint16(0); s <= wire.CoordLimitExceeded; s++ {
		if got, want := wire.CoordStatusName(s), CoordStatus(s).String(); got != want {
			t.Errorf("status %d: wire %s, fsm %s", s, got, want)
		}
	}
	if wire.CoordEndExpired != EndExpired || wire.CoordEndStopped != EndStopped || wire.CoordEndDropped != EndDropped {
		t.Error("session end reasons differ between wire and fsm")
	}
	if wire.MaxCoordData != MaxCoordData || wire.CoordExclusive != Exclusive || wire.CoordWaitForever != WaitForever {
		t.Error("limits or special counts differ between wire and fsm")
	}
}
