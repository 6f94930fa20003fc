package coordsm

import (
	"slices"
	"sort"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// DropNode is the command's log kind (never reused); its op carries Path.
const DropNode Kind = 34

func init() { register(&cmdDropNode) }

var cmdDropNode = command{kind: DropNode, name: "drop node", fields: fPath,
	request: wire.CoordDropNode, build: func(b *wire.Coord) Op { return Op{Path: string(b.Path)} },
	doc: "Deletes the node at Path with its semaphores and ends its sessions (told EXPIRED).",
	apply: func(a *applier, o *Op) Status {
		n := a.c.nodes[o.Path]
		if n == nil {
			return NotFound
		}
		a.dropNode(n)
		return Success
	}}

// dropNode ends every session of n (told EXPIRED) and deletes its semaphores.
// No grants are made: everyone who could be granted is ending too.
func (a *applier) dropNode(n *node) {
	c, r := a.c, a.r
	ids := make([]uint64, 0, len(n.sessions))
	for id := range n.sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r.event(Event{Kind: EventSessionEnded, Path: n.path, Session: id, Reason: EndDropped})
		delete(c.sessions, id)
	}
	names := make([]string, 0, len(n.sems))
	for name := range n.sems {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r.changed(n.path, name, true, true)
	}
	delete(c.nodes, n.path)
}
