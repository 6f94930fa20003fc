package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/internal/wire"
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
}

func runSnapshotSave(e *env, file string) error {
	ctx, cancel := e.context(0)
	defer cancel()
	addr, err := e.leaderAddr(ctx)
	if err != nil {
		return err
	}
	res, err := saveSnapshot(ctx, e, addr, file)
	if err != nil {
		return err
	}
	return e.emit(res, func(w io.Writer) {
		fmt.Fprintf(w, "saved snapshot of %s (index %d, term %d, %d bytes, sha256 %s) to %s\n",
			res.Node, res.Index, res.Term, res.Size, res.SHA256, res.File)
	})
}

// leaderAddr finds the leader's client address through the --addr list: the
// node that reports itself leader, or the leader a follower names.
func (e *env) leaderAddr(ctx context.Context) (string, error) {
	var lastErr error
	for _, addr := range e.addrList() {
		a, err := ticketing.DialAdmin(ctx, addr, e.options()...)
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
			}
		}
		lastErr = err
		if ctx.Err() != nil || errors.Is(err, ticketing.ErrUnauthenticated) {
			return "", err
		}
	}
	if lastErr == nil {
		return "", usageErrorf("--addr is empty")
	}
	return "", fmt.Errorf("no leader found through %s: %w", e.g.addrs, lastErr)
}

// saveSnapshot runs the admin op snapshot.save on addr: the server streams
// the snapshot in V frames with status 3, then a V with status 0 carrying
// its metadata.
func saveSnapshot(ctx context.Context, e *env, addr, file string) (snapshotResult, error) {
	res := snapshotResult{File: file, Node: addr}
	tc, err := e.clientTLS()
	if err != nil {
		return res, err
	}
	nc, r, _, err := helloSession(ctx, addr, tc, e.g.token, wire.HelloAdmin)
	if err != nil {
		return res, err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(aLongTimeAgo) })
	defer stop()

	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".partial-*")
	if err != nil {
		return res, fmt.Errorf("snapshot save: %w", err)
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()

	failed := func(format string, args ...any) (snapshotResult, error) {
		return res, fmt.Errorf("snapshot save from %s: %s; %s was not written", addr, fmt.Sprintf(format, args...), file)
	}
	const id = 1
	if _, err := nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypeAdmin, ID: id, Text: []byte(`{"op":"snapshot.save"}`)})); err != nil {
		return failed("sending the request: %v", err)
	}
	h := sha256.New()
	out := io.MultiWriter(tmp, h)
	var size int64
	for {
		var f wire.Frame
		if err := r.Next(&f); err != nil {
			return failed("the connection failed after %d bytes: %v", size, err)
		}
		switch f.Type {
		case wire.TypePing:
			if _, err := nc.Write(wire.Append(nil, &wire.Frame{Type: wire.TypePong, Nonce: f.Nonce})); err != nil {
				return failed("the connection failed: %v", err)
			}
			continue
		case wire.TypeError:
			return failed("the server ended the session: %s (code %d): %s", wire.Code(f.Code), f.Code, f.Text)
		case wire.TypeNotLeader:
			return failed("the server ended the session (not the leader)")
		case wire.TypeAdminReply:
		default:
			continue
		}
		if f.ID != id {
			continue
		}
		switch f.Code {
		case 3: // a chunk
			if _, err := out.Write(f.Text); err != nil {
				return failed("writing: %v", err)
			}
			size += int64(len(f.Text))
			continue
		case 0: // done
		default:
			var fe struct {
				Error string `json:"error"`
			}
			if json.Unmarshal(f.Text, &fe) != nil || fe.Error == "" {
				fe.Error = string(f.Text)
			}
			return failed("the server failed: %s", fe.Error)
		}
		var meta struct {
			Index  uint64 `json:"index"`
			Term   uint64 `json:"term"`
			Size   int64  `json:"size"`
			SHA256 string `json:"sha256"`
		}
		if err := json.Unmarshal(f.Text, &meta); err != nil {
			return failed("the final answer does not decode: %v", err)
		}
		sum := hex.EncodeToString(h.Sum(nil))
		if meta.Size != size || (meta.SHA256 != "" && meta.SHA256 != sum) {
			return failed("received %d bytes with sha256 %s, the server sent %d bytes with sha256 %s", size, sum, meta.Size, meta.SHA256)
		}
		if err := tmp.Sync(); err != nil {
			return failed("%v", err)
		}
		if err := tmp.Close(); err != nil {
			return failed("%v", err)
		}
		if err := os.Rename(tmp.Name(), file); err != nil {
			return failed("%v", err)
		}
		tmp = nil
		res.Index, res.Term, res.Size, res.SHA256 = meta.Index, meta.Term, size, sum
		return res, nil
	}
}
