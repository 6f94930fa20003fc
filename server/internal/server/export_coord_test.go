package server

import (
	"github.com/ticketing-io/ticketing/server/internal/core"
	"github.com/ticketing-io/ticketing/server/internal/fsm"
	"github.com/ticketing-io/ticketing/server/internal/fsm/coordsm"
)

// CoordSession is session id as this server's applied state has it, with the
// state's last batch time.
func CoordSession(s *Server, id uint64) (info coordsm.SessionInfo, lastTime int64, ok bool) {
	s.node.Read(func(st *fsm.State) {
		info, ok = st.Session(id)
		lastTime = st.LastTime()
	})
	return info, lastTime, ok
}

// SetListSessionsBudget sets the size of a list-sessions page (bytes) and
// returns the previous one.
func SetListSessionsBudget(n int) int {
	old := core.ListSessionsBudget
	core.ListSessionsBudget = n
	return old
}

// SetDescribeBudget sets the size of a describe-semaphore page (bytes) and
// returns the previous one.
func SetDescribeBudget(n int) int {
	old := core.DescribeBudget
	core.DescribeBudget = n
	return old
}
