package coordsm

// Takeover runs in a new leader's takeover entry: the connections that
// attached sessions were to the old leader, so every attached session is
// detached now. No session may expire before its timeout plus the node's
// grace period from its detach (the grace covers the leaders' clock
// differences and an old leader still answering for a moment): an attached
// one from now, a detached one from its recorded detach, so that however
// many leader changes follow, a detached session expires within timeout +
// grace of its detach.
func (c *State) Takeover(now int64) {
	for _, ss := range c.sessions {
		if ss.attached {
			ss.attached = false
			ss.detachedAt = now
		}
		if e := addMs(ss.detachedAt, ss.timeoutMs+uint64(c.nodes[ss.node].cfg.GraceMs)); e > ss.expiresAt {
			ss.expiresAt = e
		}
	}
}
