package transport

import (
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/ticketing-io/ticketing/internal/wire"
)

// A client pins the cluster it serves. Each cluster has an ID, created when
// it forms and replaced when it is restored from a snapshot; servers report
// it in their hello answer. A Broker remembers the ID of the first server
// that reports one (or takes it from WithClusterID) and refuses every server
// of another cluster: a server wiped and started as a new cluster of its
// own, or a cluster restored elsewhere, would otherwise grant keys the
// real cluster holds, with tokens that start again from 1.

// clusterIDDigits is the length of a cluster ID in hex.
const clusterIDDigits = 2 * wire.ClusterIDLen

// parseClusterID reads WithClusterID's argument.
func parseClusterID(s string) (wire.ClusterID, error) {
	var id wire.ClusterID
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != wire.ClusterIDLen || [wire.ClusterIDLen]byte(b) == id {
		return id, ConfigError(nil, "cluster ID %q is not a cluster ID: it is %d hex digits, not all zero, as ticketctl status prints it (cluster_id)", s, clusterIDDigits)
	}
	return wire.ClusterID(b), nil
}

// formatClusterID renders an ID as the servers do: hex, "none" when zero.
func formatClusterID(id wire.ClusterID) string {
	if id == (wire.ClusterID{}) {
		return "none"
	}
	return hex.EncodeToString(id[:])
}

// Pin is the cluster a client serves: set by WithClusterID or by the
// first server that reports an ID, never changed afterwards.
type Pin struct {
	mu         sync.Mutex
	id         wire.ClusterID
	known      bool
	configured bool
}

// NewPin returns the pin of a client configured with cluster ID configured
// ("" to pin the first cluster reported).
func NewPin(configured string) (*Pin, error) {
	p := &Pin{}
	if configured != "" {
		id, err := parseClusterID(configured)
		if err != nil {
			return nil, err
		}
		p.id, p.known, p.configured = id, true, true
	}
	return p, nil
}

// Get returns the pinned ID in hex, "" while none is pinned.
func (p *Pin) Get() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.known {
		return ""
	}
	return formatClusterID(p.id)
}

// check admits or refuses the server at addr by its hello answer. The
// first ID reported is pinned. A server that reports no ID is admitted
// without pinning while nothing is pinned (a cluster still forming; a
// serving leader always has its ID) and refused once an ID is pinned. A
// server that does not report at all (older than cluster IDs) is admitted
// unchecked, so that clients keep working through a rolling upgrade.
func (p *Pin) check(addr string, h *hello) error {
	if !h.reportsCluster {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !p.known && h.cluster == (wire.ClusterID{}):
		return nil
	case !p.known:
		p.id, p.known = h.cluster, true
		return nil
	case h.cluster == p.id:
		return nil
	}
	wc := &WrongClusterError{Addr: addr, NodeID: h.nodeID, Pinned: formatClusterID(p.id), Server: formatClusterID(h.cluster), Configured: p.configured}
	return &helloError{addr: addr, err: wc, rejected: true, reason: "wrong cluster"}
}

// ErrWrongCluster: a server of another cluster than the pinned one
// (package ticketing documents it).
var ErrWrongCluster error = &sentinel{"server of another cluster"}

// WrongClusterError is a server refused because it belongs to another
// cluster. It matches ErrWrongCluster.
type WrongClusterError struct {
	Addr       string // the server refused
	NodeID     string // its node id
	Pinned     string // the cluster ID the client is pinned to, 32 hex digits
	Server     string // the server's cluster ID, 32 hex digits, or "none" when it has none yet
	Configured bool   // Pinned was given with WithClusterID, not learned from the first server
}

func (e *WrongClusterError) Error() string { return Prefix + e.detail() }
func (e *WrongClusterError) detail() string {
	pinned := "pinned at the first server it reached"
	if e.Configured {
		pinned = "set by WithClusterID"
	}
	server := "belongs to cluster " + e.Server
	if e.Server == "none" {
		server = "has no cluster ID yet (cluster none: still forming)"
	}
	return fmt.Sprintf("server %s (node %s) %s, and this client is pinned to cluster %s (%s): it does not use that server. "+
		"If the cluster was restored from a snapshot, it has a new ID: give the clients the new one (WithClusterID) or restart them; "+
		"otherwise remove the address from the client's list",
		e.Addr, e.NodeID, server, e.Pinned, pinned)
}

// Is makes it match ErrWrongCluster.
func (e *WrongClusterError) Is(target error) bool { return target == ErrWrongCluster }
