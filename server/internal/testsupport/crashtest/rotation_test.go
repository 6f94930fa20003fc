package crashtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
)

// rotationLoop acquires and releases in a loop through one broker and
// counts what fails (not acquired within the wait is no failure).
type rotationLoop struct {
	granted, failed atomic.Int64
	first           atomic.Value // the first failure, for the report
	stop            chan struct{}
	wg              sync.WaitGroup
}

func startRotationLoop(b *ticketing.Broker, workers int, prefix string) *rotationLoop {
	l := &rotationLoop{stop: make(chan struct{})}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				tk, err := b.Acquire(ctx, fmt.Sprintf("%s/%d", prefix, w), 5*time.Second, 30*time.Second, 0)
				if err == nil {
					err = tk.Release(ctx)
				}
				cancel()
				switch {
				case err == nil:
					l.granted.Add(1)
				case errors.Is(err, ticketing.ErrNotAcquired):
				default:
					l.failed.Add(1)
					l.first.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	return l
}

func (l *rotationLoop) end() { close(l.stop); l.wg.Wait() }

// progress waits until the loop has n more acquire+release rounds.
func (l *rotationLoop) progress(t *testing.T, what string, n int64) {
	t.Helper()
	from := l.granted.Load()
	deadline := time.Now().Add(startTimeout)
	for l.granted.Load() < from+n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d rounds in %v, want %d (failures so far %d, first %v)", what, l.granted.Load()-from, startTimeout, n, l.failed.Load(), l.first.Load())
		}
		time.Sleep(20 * time.Millisecond) // polling a counter, with a deadline
	}
}

// TestCARotationWithoutFailures follows docs/deployment.md, "Rotating the
// CA", on a three-server cluster whose client port and Raft use one
// certificate per server from one CA: clients first trust the old and the
// new CA; then, one rolling restart each, the servers trust both CAs for
// Raft, get certificates from the new CA, and trust the new CA alone.
// An acquire/release loop of a client trusting both CAs runs throughout
// and may not fail once; a client that trusts only the old CA (the step
// skipped) cannot reconnect once the servers present new certificates.
func TestCARotationWithoutFailures(t *testing.T) {
	oldCA, newCA := newNamedTestPKI(t, "old Ticketing CA"), newNamedTestPKI(t, "new Ticketing CA")
	base := t.TempDir()
	both := filepath.Join(base, "ca-both.crt")
	oldPEM, err := os.ReadFile(oldCA.caFile)
	if err != nil {
		t.Fatal(err)
	}
	newPEM, err := os.ReadFile(newCA.caFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(both, append(append([]byte{}, oldPEM...), newPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(base, "ticketd.toml")
	if err := os.WriteFile(cfgFile, []byte(plannedConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	type certs struct{ cert, key string }
	oldCerts, newCerts := map[string]certs{}, map[string]certs{}
	var ps []*proc
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		c, k := oldCA.issue(t, id, "")
		oldCerts[id] = certs{c, k}
		c, k = newCA.issue(t, id, "")
		newCerts[id] = certs{c, k}
		ps = append(ps, newProc(t, id, base))
	}
	bootstrap := peers(ps...)
	// configure sets a server's flags: its certificate (client port and
	// Raft alike, as docs/deployment.md makes them) and the Raft CA file.
	configure := func(p *proc, c certs, raftCA string) {
		p.extra = []string{"--config", cfgFile, "--bootstrap", bootstrap, "--tls-cert", c.cert, "--tls-key", c.key,
			"--raft-tls-cert", c.cert, "--raft-tls-key", c.key, "--raft-tls-ca", raftCA}
	}
	for _, p := range ps {
		configure(p, oldCerts[p.id], oldCA.caFile)
		p.start()
	}
	for _, p := range ps {
		p.mustReady()
	}
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.client)
	}
	connect := func(caFile string) *ticketing.Broker {
		b, err := ticketing.Connect(strings.Join(addrs, ","), ticketing.WithTLS(ticketing.TLSCAFile(caFile)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}

	// Step 1: clients trust both CAs (here: the loop's client from the start).
	loop := startRotationLoop(connect(both), 4, "rotation")
	stale := startRotationLoop(connect(oldCA.caFile), 1, "stale")
	loop.progress(t, "before the rotation", 100)
	rolling := func(step string, set func(p *proc)) {
		t.Helper()
		for _, p := range ps {
			p.stop()
			set(p)
			p.start()
			p.mustReady()
			loop.progress(t, step+", after restarting "+p.id, 50)
		}
	}
	// Step 2: every server trusts both CAs for Raft.
	rolling("servers trust both CAs", func(p *proc) { configure(p, oldCerts[p.id], both) })
	// Step 3: every server presents a certificate from the new CA.
	rolling("servers present new certificates", func(p *proc) { configure(p, newCerts[p.id], both) })
	staleFailedBefore := stale.failed.Load()
	// Step 4: every server trusts the new CA alone.
	rolling("servers trust the new CA alone", func(p *proc) { configure(p, newCerts[p.id], newCA.caFile) })
	loop.end()
	stale.end()
	t.Logf("CA rotation, 3 rolling restarts: %d acquire+release rounds, %d failed; a client trusting only the old CA failed %d times",
		loop.granted.Load(), loop.failed.Load(), stale.failed.Load())
	if n := loop.failed.Load(); n != 0 {
		t.Errorf("%d acquire/release rounds failed during the rotation, want 0; the first: %v", n, loop.first.Load())
	}
	if staleFailedBefore == 0 && stale.failed.Load() == 0 {
		t.Errorf("a client trusting only the old CA never failed: the servers did not switch to the new certificates")
	}
}

// TestClientCARotationWithoutFailures follows docs/deployment.md's
// rotation of the CA that signs client certificates (tls.ca, mTLS): the
// servers trust both client CAs, the clients move to certificates of the
// new one, the servers trust the new one alone. Clients acquire and release
// throughout; none of their rounds may fail.
func TestClientCARotationWithoutFailures(t *testing.T) {
	serverCA := newNamedTestPKI(t, "Ticketing server CA")
	oldClients, newClients := newNamedTestPKI(t, "old client CA"), newNamedTestPKI(t, "new client CA")
	base := t.TempDir()
	both := filepath.Join(base, "client-cas.crt")
	var pems []byte
	for _, f := range []string{oldClients.caFile, newClients.caFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pems = append(pems, b...)
	}
	if err := os.WriteFile(both, pems, 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(base, "ticketd.toml")
	if err := os.WriteFile(cfgFile, []byte(plannedConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	var ps []*proc
	serverCerts := map[string][2]string{}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		c, k := serverCA.issue(t, id, "")
		serverCerts[id] = [2]string{c, k}
		ps = append(ps, newProc(t, id, base))
	}
	bootstrap := peers(ps...)
	configure := func(p *proc, clientCA string) {
		c := serverCerts[p.id]
		p.extra = []string{"--config", cfgFile, "--bootstrap", bootstrap, "--tls-cert", c[0], "--tls-key", c[1], "--tls-client-ca", clientCA,
			"--raft-tls-cert", c[0], "--raft-tls-key", c[1], "--raft-tls-ca", serverCA.caFile}
	}
	for _, p := range ps {
		configure(p, oldClients.caFile)
		p.start()
	}
	for _, p := range ps {
		p.mustReady()
	}
	var addrs []string
	for _, p := range ps {
		addrs = append(addrs, p.client)
	}
	connect := func(clients *testPKI) *ticketing.Broker {
		cert, key := clients.issue(t, "app", "")
		b, err := ticketing.Connect(strings.Join(addrs, ","), ticketing.WithTLS(ticketing.TLSCAFile(serverCA.caFile).WithClientCert(cert, key)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}
	oldLoop := startRotationLoop(connect(oldClients), 3, "old-client")
	oldLoop.progress(t, "before the rotation", 100)
	rolling := func(step string, loop *rotationLoop, set func(p *proc)) {
		t.Helper()
		for _, p := range ps {
			p.stop()
			set(p)
			p.start()
			p.mustReady()
			loop.progress(t, step+", after restarting "+p.id, 50)
		}
	}
	// Step 1: every server accepts client certificates of both CAs.
	rolling("servers accept both client CAs", oldLoop, func(p *proc) { configure(p, both) })
	// Step 2: the clients move to certificates of the new CA.
	newLoop := startRotationLoop(connect(newClients), 3, "new-client")
	newLoop.progress(t, "a client with a new certificate", 100)
	oldLoop.end()
	// Step 3: every server accepts the new client CA alone.
	rolling("servers accept the new client CA alone", newLoop, func(p *proc) { configure(p, newClients.caFile) })
	newLoop.end()
	t.Logf("client CA rotation, 2 rolling restarts: %d rounds with old certificates, %d with new ones; %d and %d failed",
		oldLoop.granted.Load(), newLoop.granted.Load(), oldLoop.failed.Load(), newLoop.failed.Load())
	if oldLoop.failed.Load() != 0 || newLoop.failed.Load() != 0 {
		t.Errorf("rounds failed during the rotation, want none; first with the old certificate: %v; with the new: %v", oldLoop.first.Load(), newLoop.first.Load())
	}
}
