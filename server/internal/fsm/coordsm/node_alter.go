package coordsm

import "github.com/ticketing-io/ticketing/internal/wire"

// AlterNode is the command's log kind (never reused); its op carries Path, Config (0 fields unchanged).
const AlterNode Kind = 33

func init() { register(&cmdAlterNode) }

var cmdAlterNode = command{kind: AlterNode, name: "alter node", fields: fPath | fConfig,
	request: wire.CoordAlterNode, build: func(b *wire.Coord) Op { return Op{Path: string(b.Path), Config: configOf(b)} },
	doc: "Changes the configuration of the node at Path; zero fields stay unchanged.",
	apply: func(a *applier, o *Op) Status {
		n := a.c.nodes[o.Path]
		if n == nil {
			return NotFound
		}
		cfg := n.cfg.merge(o.Config)
		if !cfg.valid() {
			return BadRequest
		}
		n.cfg = cfg
		return Success
	}}
