package coordination

import (
	"fmt"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// checkSizes refuses, before anything is sent, a request whose fields are
// longer than the server accepts (docs/coordination.md, Limits). A request
// the server cannot read whole would otherwise cost the connection, and an
// acquire sent again after each restore would loop.
func checkSizes(op uint8, b *wire.Coord) error {
	for _, f := range []struct {
		name string
		n    int
		max  int
	}{
		{"path", len(b.Path), wire.MaxCoordPath},
		{"name", len(b.Name), wire.MaxCoordName},
		{"data", len(b.Data), wire.MaxCoordData},
		{"description", len(b.Desc), wire.MaxCoordDesc},
		{"protection key", len(b.Key), wire.MaxCoordKey},
	} {
		if f.n > f.max {
			return &StatusError{Op: opName(op), Status: wire.CoordBadRequest,
				Message: fmt.Sprintf("%s: %d bytes, at most %d (refused before sending: nothing was sent)", f.name, f.n, f.max)}
		}
	}
	return nil
}

// opName names a request sub-op in errors.
func opName(op uint8) string {
	switch op {
	case wire.CoordCreateNode:
		return "create node"
	case wire.CoordAlterNode:
		return "alter node"
	case wire.CoordDropNode:
		return "drop node"
	case wire.CoordDescribeNode:
		return "describe node"
	case wire.CoordAttach:
		return "attach session"
	case wire.CoordStop:
		return "stop session"
	case wire.CoordCreateSemaphore:
		return "create semaphore"
	case wire.CoordUpdateSemaphore:
		return "update semaphore"
	case wire.CoordDeleteSemaphore:
		return "delete semaphore"
	case wire.CoordAcquire:
		return "acquire"
	case wire.CoordRelease:
		return "release"
	case wire.CoordDescribeSemaphore:
		return "describe semaphore"
	case wire.CoordListSessions:
		return "list sessions"
	}
	return fmt.Sprintf("sub-op %d", op)
}
