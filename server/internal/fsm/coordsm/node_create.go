package coordsm

import "github.com/ticketing-io/ticketing/internal/wire"

// CreateNode is the command's log kind (never reused); its op carries Path, Config.
const CreateNode Kind = 32

func init() { register(&cmdCreateNode) }

var cmdCreateNode = command{kind: CreateNode, name: "create node", fields: fPath | fConfig,
	request: wire.CoordCreateNode, build: func(b *wire.Coord) Op { return Op{Path: string(b.Path), Config: configOf(b)} },
	doc: "Creates a node at Path with Config, each zero field taking its default.",
	apply: func(a *applier, o *Op) Status {
		c := a.c
		if !validPath(o.Path) {
			return BadRequest
		}
		if c.nodes[o.Path] != nil {
			return AlreadyExists
		}
		cfg := DefaultNodeConfig.merge(o.Config)
		if !cfg.valid() {
			return BadRequest
		}
		c.nodes[o.Path] = &node{path: o.Path, cfg: cfg,
			sessions: make(map[uint64]*session), sems: make(map[string]*semaphore)}
		return Success
	}}
