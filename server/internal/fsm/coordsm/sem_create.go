package coordsm

import "github.com/ticketing-io/ticketing/internal/wire"

// CreateSem is the command's log kind (never reused); its op carries Session, SeqNo, Name, Limit, Data.
const CreateSem Kind = 39

func init() { register(&cmdCreateSem) }

var cmdCreateSem = command{kind: CreateSem, name: "create semaphore", fields: fSession | fSeqNo | fName | fLimit | fData,
	request: wire.CoordCreateSemaphore, inSession: true,
	build: func(b *wire.Coord) Op { return Op{Name: string(b.Name), Data: string(b.Data), Limit: b.Limit} },
	doc:   "Creates a persistent semaphore Name with Limit and Data on the session's node.",
	apply: onSemaphore(func(a *applier, n *node, _ *session, sem *semaphore, o *Op) Status {
		if o.Limit == 0 {
			return BadRequest
		}
		if sem != nil {
			return AlreadyExists
		}
		if len(n.sems) >= int(n.cfg.MaxSemaphores) {
			return LimitExceeded
		}
		sem = &semaphore{name: o.Name, limit: o.Limit, data: o.Data}
		a.c.touch(sem)
		n.sems[o.Name] = sem
		return Success
	})}
