package ticketing

import "github.com/ticketing-io/ticketing/internal/transport"

// A client pins the cluster it serves. Each cluster has an ID, created when
// it forms and replaced when it is restored from a snapshot; servers report
// it in their hello answer. A Broker remembers the ID of the first server
// that reports one (or takes it from WithClusterID) and refuses every server
// of another cluster: a server wiped and started as a new cluster of its
// own, or a cluster restored elsewhere, would otherwise grant keys the
// real cluster holds, with tokens that start again from 1.

// WithClusterID pins the client to the cluster with this ID (32 hex digits,
// as ticketctl status and the servers' logs print it) from the start,
// instead of to the cluster of the first server it reaches. A server of
// another cluster is refused with ErrWrongCluster. After the cluster has been
// restored from a snapshot (which gives it a new ID), give the new ID, or
// restart clients that pinned the old one without this option.
func WithClusterID(id string) Option { return func(c *config) { c.clusterID = id } }

// ErrWrongCluster: a server belongs to another cluster than the one the
// client is pinned to (the first cluster it reached, or WithClusterID), or
// has no cluster ID yet while the client is pinned. The client never uses
// such a server and keeps trying the other addresses. WaitReady and calls
// return it at once when every listed server is refused so, and when their
// context ends while no server of the pinned cluster could be reached and
// one of another cluster was refused; such an error also matches
// ErrUnavailable (no usable server). Use errors.As with *WrongClusterError
// for both IDs.
var ErrWrongCluster = transport.ErrWrongCluster

// WrongClusterError is a server refused because it belongs to another
// cluster. It matches ErrWrongCluster.
//
//	type WrongClusterError struct {
//		Addr       string // the server refused
//		NodeID     string // its node id
//		Pinned     string // the cluster ID the client is pinned to, 32 hex digits
//		Server     string // the server's cluster ID, 32 hex digits, or "none" when it has none yet
//		Configured bool   // Pinned was given with WithClusterID, not learned from the first server
//	}
type WrongClusterError = transport.WrongClusterError

// ClusterID returns the ID of the cluster the broker is pinned to (32 hex
// digits), or "" until a server has reported one (and no WithClusterID was
// given).
func (b *Broker) ClusterID() string { return b.cfg.Pin.Get() }

// ClusterID returns the cluster ID the node reported in its hello answer (32
// hex digits), or "" when it reported none (a cluster still forming, or a
// server older than cluster IDs).
func (a *Admin) ClusterID() string { return a.pin.Get() }
