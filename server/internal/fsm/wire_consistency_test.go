package fsm

import (
	"github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"
	"testing"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// TestCoordStatusesMatchFSM: the wire numbers are the state machine's.
func TestCoordStatusesMatchFSM(t *testing.T) {
	for s := uint16(0); s <= wire.CoordLimitExceeded; s++ {
		if got, want := wire.CoordStatusName(s), coordsm.Status(s).String(); got != want {
			t.Errorf("status %d: wire %s, fsm %s", s, got, want)
		}
	}
	if wire.CoordEndExpired != coordsm.EndExpired || wire.CoordEndStopped != coordsm.EndStopped || wire.CoordEndDropped != coordsm.EndDropped {
		t.Error("session end reasons differ between wire and fsm")
	}
	if wire.MaxCoordData != coordsm.MaxData || wire.CoordExclusive != coordsm.Exclusive || wire.CoordWaitForever != coordsm.WaitForever {
		t.Error("limits or special counts differ between wire and fsm")
	}
}
