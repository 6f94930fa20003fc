package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ticketing-io/ticketing/internal/benchkit"
)

// Fsync is the workload that measures the disk's floor, with no server: one
// 4 KiB append + fdatasync after another (queue depth 1) to a file in the
// directory where the servers keep their data ($TMPDIR). Every commit of a
// Raft log on this disk costs at least one of these, so a single-client
// acquire (one commit) cannot be faster than its latency.
const Fsync = "fsync"

// fsyncBlock is the size of one write: a small log append fits in it.
const fsyncBlock = 4096

// runFsync measures write+fdatasync latency for warmup+duration in dir.
func runFsync(ctx context.Context, cfg Config, dir string) (*benchkit.Result, error) {
	f, err := os.CreateTemp(dir, "ticketbench-fsync-*")
	if err != nil {
		return nil, fmt.Errorf("fsync floor: %w", err)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	defer func() { _ = f.Close() }() // a measurement file: nothing to lose
	buf := make([]byte, fsyncBlock)
	for i := range buf {
		buf[i] = byte(i)
	}
	start := time.Now().Add(cfg.Warmup)
	win := benchkit.Window{Start: start, End: start.Add(cfg.Duration)}
	rec := &benchkit.Recorder{}
	var cpu0 benchkit.CPUSample
	started := false
	var size int64
	for n := int64(0); n < cfg.MaxOps && ctx.Err() == nil; n++ {
		t0 := time.Now()
		if !t0.Before(win.End) {
			break
		}
		if !started && !t0.Before(win.Start) {
			cpu0, started = benchkit.SampleCPU(nil), true
		}
		// Append like a log does; start over at 64 MiB so the file stays small.
		if size >= 64<<20 {
			if err := f.Truncate(0); err != nil {
				return nil, err
			}
			size = 0
		}
		if _, err := f.WriteAt(buf, size); err != nil {
			return nil, fmt.Errorf("fsync floor: write: %w", err)
		}
		if err := fdatasync(f); err != nil {
			return nil, fmt.Errorf("fsync floor: fdatasync: %w", err)
		}
		size += fsyncBlock
		t1 := time.Now()
		if win.In(t0) {
			rec.Ops++
			rec.Pair = append(rec.Pair, t1.Sub(t0))
			rec.Acquire = append(rec.Acquire, t1.Sub(t0))
		}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r := &benchkit.Result{System: "disk", Workload: Fsync, Nodes: 0, Clients: 1}
	r.AddRecorders([]*benchkit.Recorder{rec}, win, true)
	notes := []string{fmt.Sprintf("dir=%s write_bytes=%d append+fdatasync queue_depth=1", dir, fsyncBlock)}
	if started {
		notes = append(notes, benchkit.CPUNotes(cpu0, benchkit.SampleCPU(nil), false)...)
	}
	r.Notes = strings.Join(notes, "; ")
	return r, nil
}
