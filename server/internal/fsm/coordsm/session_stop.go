package coordsm

import "github.com/ticketing-io/ticketing/internal/wire"

// Stop is the command's log kind (never reused); its op carries Session, SeqNo: ended by its client.
const Stop Kind = 38

func init() { register(&cmdStop) }

var cmdStop = command{kind: Stop, name: "stop", fields: fSession | fSeqNo,
	request: wire.CoordStop, inSession: true, build: func(*wire.Coord) Op { return Op{} },
	doc: "Ends the session at its client's request: its holds are released and its waits dropped.",
	apply: func(a *applier, o *Op) Status {
		ss, st := a.c.attached(o)
		if ss == nil {
			return st
		}
		a.endSession(ss, EndStopped)
		return Success
	}}
