package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/ticketing-io/ticketing"
)

var snapshotCmd = &command{
	name:    "snapshot",
	args:    "save FILE",
	summary: "save a backup of the cluster's state, taken on the leader, to FILE",
	setup: func(fs *flag.FlagSet) runFunc {
		return func(e *env, args []string) error {
			if len(args) == 0 || args[0] != "save" {
				return usageErrorf("snapshot needs the subcommand save FILE")
			}
			if len(args) != 2 || args[1] == "" {
				return usageErrorf("snapshot save takes one FILE, got %d arguments", len(args)-1)
			}
			return runSnapshotSave(e, args[1])
		}
	},
}

func init() {
	commandDetails["snapshot"] = `snapshot save FILE asks the leader for a snapshot of the whole ticket state
(taken now) and writes it to FILE, replacing it only once the snapshot has
arrived complete and its size and SHA-256 match what the server sent.
Restore it into a new single-node cluster with "ticketd --restore FILE"
and an empty data directory, then add members. Large states may need a
longer --timeout.
`
}

type snapshotResult struct {
	File   string `json:"file"`
	Node   string `json:"node"` // client address of the node that took it
	Index  uint64 `json:"index"`
	Term   uint64 `json:"term"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// ClusterID is the cluster the snapshot is of (a restore gives the
	// restored cluster a new one).
	ClusterID string `json:"cluster_id"`
}

func runSnapshotSave(e *env, file string) error {
	ctx, cancel := e.context(0)
	defer cancel()
	// The temporary file first: a directory that cannot take the snapshot
	// fails before the cluster is asked for one.
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".partial-*")
	if err != nil {
		return fmt.Errorf("snapshot save: %w", err)
	}
	defer func() {
		_ = tmp.Close()
		os.Remove(tmp.Name()) // fails harmlessly once renamed to file
	}()
	addr, err := e.leaderAddr(ctx)
	if err != nil {
		return err
	}
	res, err := saveSnapshot(ctx, e, addr, tmp, file)
	if err != nil {
		return err
	}
	return e.emit(res, func(w io.Writer) {
		fmt.Fprintf(w, "saved snapshot of %s (index %d, term %d, %d bytes, sha256 %s) to %s\n",
			res.Node, res.Index, res.Term, res.Size, res.SHA256, res.File)
		printClusterID(w, res.ClusterID)
	})
}

// leaderAddr finds the leader's client address through the --addr list: the
// node that reports itself leader, or the leader a follower names. While
// the nodes that answer know no leader (an election), it asks again within
// ctx.
func (e *env) leaderAddr(ctx context.Context) (string, error) {
	addrs := e.addrList()
	if len(addrs) == 0 {
		return "", usageErrorf("--addr is empty")
	}
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		var lastErr error
		electing := false
		for _, addr := range addrs {
			a, err := ticketing.DialAdmin(ctx, addr, e.adminOptions()...)
			if err == nil {
				var s ticketing.Status
				s, err = a.Status(ctx)
				a.Close()
				if err == nil {
					if s.Role == "leader" {
						return addr, nil
					}
					if s.LeaderAddr != "" {
						return s.LeaderAddr, nil
					}
					err = fmt.Errorf("%s (%s) knows no leader", addr, s.Role)
					electing = true
				}
			}
			lastErr = err
			if ctx.Err() != nil || errors.Is(err, ticketing.ErrUnauthenticated) || errors.Is(err, ticketing.ErrPermissionDenied) {
				return "", err // a refusal, not a missing leader
			}
		}
		if !electing {
			return "", fmt.Errorf("no leader found through %s: %w", e.g.addrs, lastErr)
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("no leader found through %s before %w: %w", e.g.addrs, ctx.Err(), lastErr)
		}
	}
}

// saveSnapshot saves a snapshot of the node at addr (admin op
// snapshot.save) into tmp, and renames tmp to file once the snapshot is
// complete and its size and SHA-256 match what the node sent.
func saveSnapshot(ctx context.Context, e *env, addr string, tmp *os.File, file string) (snapshotResult, error) {
	res := snapshotResult{File: file, Node: addr}
	a, err := ticketing.DialAdmin(ctx, addr, e.adminOptions()...)
	if err != nil {
		return res, err
	}
	defer a.Close()
	res.ClusterID = a.ClusterID()
	failed := func(err error) (snapshotResult, error) {
		return res, fmt.Errorf("snapshot save from %s: %w; %s was not written", addr, err, file)
	}
	info, err := a.SaveSnapshot(ctx, tmp)
	if err != nil {
		return failed(err)
	}
	if err := tmp.Sync(); err != nil {
		return failed(err)
	}
	if err := tmp.Close(); err != nil {
		return failed(err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return failed(err)
	}
	res.Index, res.Term, res.Size, res.SHA256 = info.Index, info.Term, info.Size, info.SHA256
	return res, nil
}
