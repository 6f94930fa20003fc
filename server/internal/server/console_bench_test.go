package server_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
	"github.com/ticketing-io/ticketing/server/internal/server"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// BenchmarkConsoleTicketsPage is the first tickets page of the console, by
// key and by time left, as a browser gets it over HTTP, from a server that
// restored a backup of
// $TICKETING_BENCH_HELD held keys (20000 unless set; docs/deployment.md
// gives the figure for 1,000,000), with the view cache off so that every
// request reads the state.
func BenchmarkConsoleTicketsPage(b *testing.B) {
	held := 20000
	if v := os.Getenv("TICKETING_BENCH_HELD"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 {
			b.Fatalf("TICKETING_BENCH_HELD=%q: want a number of keys, at least 100", v)
		}
		held = n
	}
	backup := filepath.Join(b.TempDir(), "held.backup")
	st := fsm.New()
	const chunk = 10000
	for i := 0; i < held; i += chunk {
		batch := fsm.Batch{Time: time.Now().UnixMilli()}
		for j := i; j < min(i+chunk, held); j++ {
			batch.Ops = append(batch.Ops, fsm.Op{Kind: fsm.OpAcquire, Key: fmt.Sprintf("tenant-%d/job/%08d", j%10, j),
				Owner: fsm.Owner{byte(j), byte(j >> 8), byte(j >> 16)}, LeaseMs: 3_600_000})
		}
		st.Apply(batch)
	}
	f, err := os.Create(backup)
	if err != nil {
		b.Fatal(err)
	}
	if err := st.WriteSnapshot(f); err != nil {
		b.Fatal(err)
	}
	f.Close()
	b.Cleanup(server.SetConsoleCache(0)) // runs after the server's cleanup
	c := testcluster.Start(b, 1, testcluster.WithConfig(func(cfg *server.Config) {
		cfg.HTTP.Console = true
		cfg.RestoreFile = backup
		cfg.SnapshotThreshold = 1 << 30 // no snapshot of the restored state while measuring
	}))
	base := "http://" + c.Server(0).HTTPAddr().String() + "/console/tickets"
	for _, q := range []string{"", "?prefix=tenant-3%2F", "?sort=left", "?prefix=tenant-3%2F&sort=left"} {
		b.Run("query="+q, func(b *testing.B) {
			for b.Loop() {
				resp, err := http.Get(base + q)
				if err != nil {
					b.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || strings.Count(string(body), `<tr class="ticket"`) != 50 {
					b.Fatalf("%s (%v): %s", resp.Status, err, body)
				}
			}
		})
	}
}
