// Command ticketd runs one server of a Ticketing cluster.
//
// With no flags it starts a working single-node server on loopback. See
// ticketd -h for the flags, examples/ticketd.toml for the equivalent config
// file, and docs/deployment.md for running a cluster.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ticketing-io/ticketing/server/internal/buildinfo"
	"github.com/ticketing-io/ticketing/server/internal/node"
	"github.com/ticketing-io/ticketing/server/internal/server"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version or VCS revision is reported (buildinfo).
var version = ""

// shutdownTimeout bounds srv.Shutdown after SIGTERM/SIGINT: handing
// leadership over and closing connections. A second signal exits at once.
const shutdownTimeout = 20 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// After the first signal, restore the default handling so that a
	// second one ends the process without waiting for the shutdown.
	go func() {
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr, nil))
}

// run is ticketd without the process around it: it serves until ctx is
// done, then shuts down. started, when non-nil, is called once the server
// is serving. It returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, started func(*server.Server)) int {
	if len(args) > 0 && args[0] == "hash-token" {
		return hashToken(args[1:], stdin, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "new-raft-secret" {
		return newRaftSecret(args[1:], stdout, stderr)
	}
	// Registered before the server starts, so that a SIGHUP arriving early
	// is a reload, not the default action (ending the process).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	cfg, cl, err := loadCmdline(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errVersion):
		fmt.Fprintln(stdout, buildinfo.Read(version))
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "ticketd: %v\n", err)
		return 1
	}
	logger := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	cfg.Logger = logger
	cfg.Build = buildinfo.Read(version)
	if cl.exportFile != "" {
		if err := exportBackup(filepath.Join(cfg.DataDir, "raft"), cl.exportFile, stdout); err != nil {
			fmt.Fprintf(stderr, "ticketd: export backup: %v\n", err)
			return 1
		}
		return 0
	}

	srv, err := server.New(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "ticketd: %v\n", err)
		return 1
	}
	// server.New logs the startup line (node id, version, addresses, data dir).
	if started != nil {
		started(srv)
	}

	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-hup:
			reloadAuth(srv, args, logger)
		}
	}
	logger.Info("shutting down", "timeout", shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Error("shutdown failed", "err", err)
		return 1
	}
	logger.Info("stopped")
	return 0
}

// stdin is where hash-token reads the token (a variable for tests).
var stdin io.Reader = os.Stdin

// hashToken implements `ticketd hash-token`: it reads one token from the
// first line of standard input (not from the command line, where other
// users could see it) and prints its SHA-256 as token_sha256 expects.
func hashToken(args []string, in io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, `ticketd hash-token: takes no arguments; give the token on standard input, e.g. echo "$TOKEN" | ticketd hash-token`)
		return 2
	}
	line, err := bufio.NewReader(io.LimitReader(in, 4096)).ReadString('\n')
	if err != nil && err != io.EOF {
		fmt.Fprintf(stderr, "ticketd hash-token: read the token from standard input: %v\n", err)
		return 1
	}
	tok := strings.TrimRight(line, "\r\n")
	if tok == "" || len(tok) > 1024 {
		fmt.Fprintln(stderr, "ticketd hash-token: the token on standard input must be 1..1024 bytes (one line)")
		return 1
	}
	fmt.Fprintln(stdout, server.HashToken(tok))
	return 0
}

// newRaftSecret implements `ticketd new-raft-secret [--rotate] FILE`: it
// writes a fresh cluster secret to FILE (mode 0600). With --rotate FILE
// holds the cluster's secret already, and the new one goes above it: the
// first of the two rolling restarts of a rotation (docs/deployment.md).
func newRaftSecret(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ticketd new-raft-secret", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rotate := fs.Bool("rotate", false, "FILE holds the current secret: write a new one above it and keep the current one as the previous one")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: ticketd new-raft-secret [--rotate] FILE\n\nWrites a fresh cluster secret to FILE (mode 0600) for raft_secret_file; copy it to every server of the cluster.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	file := fs.Arg(0)
	if err := server.WriteNewRaftSecret(file, *rotate); err != nil {
		fmt.Fprintf(stderr, "ticketd new-raft-secret: %v\n", err)
		return 1
	}
	if *rotate {
		fmt.Fprintf(stdout, "wrote a new cluster secret to %s, above the current one (kept as the previous one). Copy the file to every server and restart them one at a time; "+
			"once all run with it, remove its second line everywhere and restart them one at a time again\n", file)
	} else {
		fmt.Fprintf(stdout, "wrote a new cluster secret to %s (mode 0600). Copy it to every server of the cluster (mode 0600, owned by the user ticketd runs as) and set raft_secret_file\n", file)
	}
	return 0
}

// reloadAuth re-reads the configuration (file and flags, as at start) and
// applies its client_tokens and [auth] settings; other settings need a
// restart. A configuration that does not load changes nothing.
func reloadAuth(srv *server.Server, args []string, logger *slog.Logger) {
	cfg, err := loadConfig(args, io.Discard)
	if err == nil {
		err = srv.SetAuth(cfg.ClientTokens, cfg.Auth) // counts its own failures
	} else {
		srv.AuthReloadFailed()
	}
	if err != nil {
		logger.Error("SIGHUP: auth settings not reloaded; the current ones stay in force", "err", err)
	}
}

// newLogger returns a logger to w at the given level, in the given format
// (Validate has already checked both; empty means info, text).
func newLogger(w io.Writer, level, format string) *slog.Logger {
	var l slog.Level
	if level != "" {
		if err := l.UnmarshalText([]byte(level)); err != nil {
			l = slog.LevelInfo
		}
	}
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// exportBackup writes the state of a stopped server's data directory to
// file, through a temporary file so that a failed export leaves nothing.
func exportBackup(dir, file string, stdout io.Writer) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".partial-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	info, err := node.Export(dir, tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "exported %s to %s: cluster %s, up to Raft entry %d, last token %d, %d tickets held\n",
		dir, file, node.FormatClusterID(info.Cluster), info.LastIndex, info.LastToken, info.Held)
	return nil
}
