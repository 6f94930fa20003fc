package coordsm

import "github.com/ticketing-io/ticketing/internal/wire"

// UpdateSem is the command's log kind (never reused); its op carries Session, SeqNo, Name, Data.
const UpdateSem Kind = 40

func init() { register(&cmdUpdateSem) }

var cmdUpdateSem = command{kind: UpdateSem, name: "update semaphore", fields: fSession | fSeqNo | fName | fData,
	request: wire.CoordUpdateSemaphore, inSession: true,
	build: func(b *wire.Coord) Op { return Op{Name: string(b.Name), Data: string(b.Data)} },
	doc:   "Replaces the Data of semaphore Name.",
	apply: onSemaphore(func(a *applier, n *node, _ *session, sem *semaphore, o *Op) Status {
		if sem == nil {
			return NotFound
		}
		sem.data = o.Data
		a.c.touch(sem)
		a.r.changed(n.path, sem.name, true, false)
		return Success
	})}
