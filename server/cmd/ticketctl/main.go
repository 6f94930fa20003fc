// Command ticketctl is the command-line client of a Ticketing cluster:
// acquire, release and describe tickets, and administer the cluster.
//
// Run ticketctl --help for the commands, flags and exit codes.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
)

// Exit codes. They are part of ticketctl's interface: scripts rely on them.
const (
	exitOK            = 0
	exitError         = 1 // any other error, usage errors and authentication failures included
	exitNotAcquired   = 2 // not acquired within the wait, release: not held, members add: still a learner
	exitCapacity      = 3 // rejected by a server capacity limit
	exitIndeterminate = 4 // outcome unknown: the answer was lost
	exitPermission    = 5 // the server refused the request for this token's principal
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// globals are the flags every command accepts.
type globals struct {
	addrs       string
	token       string
	adminToken  string
	tlsCA       string
	tlsInsecure bool
	tls         bool
	tlsCert     string
	tlsKey      string
	output      string
	timeout     time.Duration
	clusterID   string
}

const (
	defaultAddr = "127.0.0.1:5225"
	tokenEnv    = "TICKETCTL_TOKEN" // used when --token is not given
	// adminTokenEnv is used when --admin-token is not given.
	adminTokenEnv = "TICKETCTL_ADMIN_TOKEN"
)

func defineGlobals(fs *flag.FlagSet, g *globals) {
	fs.StringVar(&g.addrs, "addr", defaultAddr, "comma-separated server client addresses (host:port)")
	fs.StringVar(&g.token, "token", "", "client token, when the servers require one (default $"+tokenEnv+")")
	fs.StringVar(&g.adminToken, "admin-token", "", "operator token for status, members, leader and snapshot (default $"+adminTokenEnv+", else --token)")
	fs.StringVar(&g.tlsCA, "tls-ca", "", "use TLS, verifying the servers against the CA certificates in this PEM file")
	fs.BoolVar(&g.tlsInsecure, "tls-insecure", false, "use TLS without verifying the servers' certificates (testing only)")
	fs.BoolVar(&g.tls, "tls", false, "use TLS, verifying the servers against the system's trusted roots")
	fs.StringVar(&g.tlsCert, "tls-cert", "", "present this client certificate (PEM) to servers that require one (mutual TLS); with --tls-key")
	fs.StringVar(&g.tlsKey, "tls-key", "", "the private key (PEM) of --tls-cert")
	fs.StringVar(&g.output, "o", "text", "output format: text or json")
	fs.DurationVar(&g.timeout, "timeout", 10*time.Second, "time limit for the command (acquire adds its --wait)")
	fs.StringVar(&g.clusterID, "cluster-id", "", "talk only to servers of this cluster (32 hex digits, the cluster_id of ticketctl status): a server of another cluster is refused")
}

// command is one verb. setup defines the verb's own flags on fs and returns
// the function that runs it with the positional arguments.
type command struct {
	name    string
	args    string // positional arguments and flags, for the usage line
	summary string
	setup   func(fs *flag.FlagSet) runFunc
}

type runFunc func(e *env, args []string) error

var commands = []*command{acquireCmd, releaseCmd, describeCmd, statusCmd, membersCmd, leaderCmd, snapshotCmd, coordinationCmd}

func lookupCommand(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// usageError is a mistake on the command line; it is reported with a hint
// to --help and exit code 1.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// invocation is a parsed command line.
type invocation struct {
	g    globals
	cmd  *command // nil for plain help
	run  runFunc
	args []string // positional arguments after the command name
	help bool
	fs   *flag.FlagSet // the parsed flags, globals and the command's
}

// parseArgs splits the command line into flags and positional arguments.
// Global flags may stand before the command; after it, global and the
// command's flags may stand before, between or after its positional
// arguments. "--" ends the flags. Values are given as --flag=value or
// --flag value (booleans only as --flag or --flag=false); one or two dashes.
func parseArgs(args []string) (inv *invocation, err error) {
	inv = &invocation{}
	gfs := flag.NewFlagSet("ticketctl", flag.ContinueOnError)
	gfs.SetOutput(io.Discard)
	defineGlobals(gfs, &inv.g)
	fs := gfs // the flag set that knows the flags allowed at this point

	var flags []string // normalized as -name=value, in command-line order
	var positional []string
	defer func() {
		if err != nil && inv.fs == nil {
			// Best effort, so that an -o json seen before the mistake
			// applies to its report.
			_ = fs.Parse(flags)
		}
	}()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			if inv.cmd == nil {
				c := lookupCommand(a)
				if c == nil {
					if a == "help" {
						inv.help = true
						continue
					}
					return inv, usageErrorf("unknown command %q", a)
				}
				if inv.help {
					// "ticketctl help CMD"
					inv.cmd = c
					return inv, nil
				}
				inv.cmd = c
				fs = flag.NewFlagSet("ticketctl "+c.name, flag.ContinueOnError)
				fs.SetOutput(io.Discard)
				defineGlobals(fs, &inv.g)
				inv.run = c.setup(fs)
				continue
			}
			positional = append(positional, a)
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		name, value, hasValue := strings.Cut(name, "=")
		if name == "h" || name == "help" {
			inv.help = true
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			if inv.cmd == nil {
				if isCommandFlag(name) {
					return inv, usageErrorf("flag %s must come after the command", a)
				}
				return inv, usageErrorf("unknown flag %s", a)
			}
			return inv, usageErrorf("unknown flag %s for %s", a, inv.cmd.name)
		}
		if !hasValue && !isBoolFlag(f) {
			if i+1 >= len(args) {
				return inv, usageErrorf("flag %s needs a value", a)
			}
			i++
			value, hasValue = args[i], true
		}
		if hasValue {
			flags = append(flags, "-"+name+"="+value)
		} else {
			flags = append(flags, "-"+name)
		}
	}
	inv.fs = fs
	if err := fs.Parse(flags); err != nil {
		return inv, usageErrorf("%s", cleanFlagError(err))
	}
	inv.args = positional
	if inv.help {
		return inv, nil
	}
	if inv.cmd == nil {
		return inv, usageErrorf("no command given")
	}
	switch inv.g.output {
	case "text", "json":
	default:
		return inv, usageErrorf("-o %q: want text or json", inv.g.output)
	}
	if inv.g.timeout <= 0 {
		return inv, usageErrorf("--timeout must be positive")
	}
	if id := inv.g.clusterID; id != "" {
		if b, err := hex.DecodeString(id); err != nil || len(b) != 16 {
			return inv, usageErrorf("--cluster-id %q: want the 32 hex digits ticketctl status prints as cluster_id", id)
		}
	}
	n := 0
	for _, set := range []bool{inv.g.tlsCA != "", inv.g.tlsInsecure, inv.g.tls} {
		if set {
			n++
		}
	}
	if n > 1 {
		return inv, usageErrorf("--tls, --tls-ca and --tls-insecure are exclusive")
	}
	if (inv.g.tlsCert == "") != (inv.g.tlsKey == "") {
		return inv, usageErrorf("--tls-cert and --tls-key go together: the client certificate and its private key")
	}
	if inv.g.tlsCert != "" && n == 0 {
		return inv, usageErrorf("--tls-cert needs TLS: add --tls-ca, --tls or --tls-insecure")
	}
	return inv, nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// isCommandFlag reports whether any command defines the flag.
func isCommandFlag(name string) bool {
	for _, c := range commands {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.setup(fs)
		if fs.Lookup(name) != nil {
			return true
		}
	}
	return false
}

// cleanFlagError turns the flag package's "invalid value "x" for flag -wait:
// parse error" into a message with the flag as the user may have written it.
func cleanFlagError(err error) string {
	msg := err.Error()
	msg = strings.Replace(msg, "for flag -", "for --", 1)
	return msg
}

// env is what a command runs with.
type env struct {
	g      globals
	stdout io.Writer
	stderr io.Writer
}

func (e *env) json() bool { return e.g.output == "json" }

// addrList is --addr split and trimmed.
func (e *env) addrList() []string {
	var out []string
	for _, a := range strings.Split(e.g.addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// adminOptions are options() with the admin token, when one is given, in
// place of the application token: the admin commands use them.
func (e *env) adminOptions() []ticketing.Option {
	if e.g.adminToken == "" {
		return e.options()
	}
	return append(e.options(), ticketing.WithToken(e.g.adminToken))
}

// options are the client options the global flags ask for.
func (e *env) options() []ticketing.Option {
	// The client's background logging (reconnects) would only clutter the
	// output; every outcome that matters comes back as an error.
	opts := []ticketing.Option{ticketing.WithLogger(slog.New(slog.DiscardHandler))}
	if e.g.token != "" {
		opts = append(opts, ticketing.WithToken(e.g.token))
	}
	if e.g.clusterID != "" {
		opts = append(opts, ticketing.WithClusterID(e.g.clusterID))
	}
	mode := ticketing.TLSOff()
	switch {
	case e.g.tlsCA != "":
		mode = ticketing.TLSCAFile(e.g.tlsCA)
	case e.g.tlsInsecure:
		mode = ticketing.TLSInsecureSkipVerify()
	case e.g.tls:
		mode = ticketing.TLSSystemRoots()
	}
	if e.g.tlsCert != "" || e.g.tlsKey != "" {
		mode = mode.WithClientCert(e.g.tlsCert, e.g.tlsKey)
	}
	return append(opts, ticketing.WithTLS(mode))
}

// emit prints a command's result: the JSON object with -o json, otherwise
// the text lines.
func (e *env) emit(obj any, text func(w io.Writer)) error {
	if e.json() {
		enc := json.NewEncoder(e.stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(obj)
	}
	text(e.stdout)
	return nil
}

// run is ticketctl without the process around it; it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	inv, err := parseArgs(args)
	if inv.help {
		if inv.cmd != nil {
			commandUsage(stdout, inv.cmd)
		} else {
			usage(stdout)
		}
		return exitOK
	}
	e := &env{g: inv.g, stdout: stdout, stderr: stderr}
	if e.g.token == "" {
		// Keeps the token out of the process list and shell history.
		e.g.token = os.Getenv(tokenEnv)
	}
	if e.g.adminToken == "" {
		e.g.adminToken = os.Getenv(adminTokenEnv)
	}
	if err != nil {
		if inv.g.output != "json" {
			e.g.output = "text"
		}
		return e.fail(withHint(err, inv.cmd))
	}
	if err := inv.run(e, inv.args); err != nil {
		return e.fail(withHint(err, inv.cmd))
	}
	return exitOK
}

// withHint points usage errors to the relevant help.
func withHint(err error, c *command) error {
	var ue *usageError
	if !errors.As(err, &ue) {
		return err
	}
	hint := "ticketctl --help"
	if c != nil {
		hint = "ticketctl " + c.name + " --help"
	}
	return fmt.Errorf("%w (see %s)", err, hint)
}

// context bounds a command by --timeout plus extra (acquire's wait, which
// the server spends before answering).
func (e *env) context(extra time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), e.g.timeout+extra)
}

// fail reports err and returns its exit code. With -o json the error object
// goes to stdout and the message to stderr as well.
func (e *env) fail(err error) int {
	code, name := classify(err)
	msg := errorMessage(err) + e.waitingHint(err)
	fmt.Fprintf(e.stderr, "ticketctl: %s\n", msg)
	if e.json() {
		_ = e.emit(errorResult{Error: msg, Code: name}, nil)
	}
	return code
}

type errorResult struct {
	Error string `json:"error"`
	Code  string `json:"code"` // not_acquired, not_held, learner, capacity, indeterminate, permission_denied, wrong_cluster or error
}

// classify maps an error to the exit code and the JSON code name.
func classify(err error) (int, string) {
	switch {
	case err == nil:
		return exitOK, ""
	case errors.Is(err, ticketing.ErrNotAcquired):
		return exitNotAcquired, "not_acquired"
	case errors.Is(err, ticketing.ErrNotHeld):
		return exitNotAcquired, "not_held"
	case errors.Is(err, errStillLearner):
		return exitNotAcquired, "learner"
	case errors.Is(err, ticketing.ErrCapacity):
		return exitCapacity, "capacity"
	case errors.Is(err, ticketing.ErrIndeterminate):
		return exitIndeterminate, "indeterminate"
	case errors.Is(err, ticketing.ErrPermissionDenied), errors.Is(err, coordination.ErrUnauthorized):
		return exitPermission, "permission_denied"
	case errors.Is(err, coordination.ErrIndeterminate):
		return exitIndeterminate, "indeterminate"
	case errors.Is(err, ticketing.ErrWrongCluster):
		return exitError, "wrong_cluster" // a server of another cluster than --cluster-id
	}
	if code, ok := coordCode(err); ok {
		return exitError, code // not_found, already_exists, ...: scripts may tell them apart
	}
	return exitError, "error"
}

// errorMessage is the text shown for err: the client's messages already say
// what happened; authentication failures and timeouts get a hint.
func errorMessage(err error) string {
	msg := err.Error()
	var pe *ticketing.PermissionError
	switch {
	case errors.Is(err, ticketing.ErrUnauthenticated):
		// A refused token is an E frame (code 5); a refused client
		// certificate is a TLS alert, explained by the client.
		var se *ticketing.ServerError
		switch {
		case !errors.As(err, &se) && strings.Contains(msg, "certificate"):
			return "authentication failed: the server refused the client certificate (check --tls-cert, --tls-key): " + msg
		case strings.Contains(msg, "client certificate's identity"):
			// Verified, but listed under no principal (hello without a token).
			return "authentication failed: the server refused the client certificate: its identity names no principal (check --tls-cert, or the server's [auth] certificates): " + msg
		case strings.Contains(msg, "revoked"):
			return "authentication failed: the server revoked the credential of this connection (a configuration reload removed it): " + msg
		}
		return "authentication failed: the server refused the token (check --token, or --admin-token for admin commands): " + msg
	case errors.As(err, &pe) && pe.Reason == ticketing.PermissionRole:
		return msg + " (admin commands take an admin token: --admin-token or $" + adminTokenEnv + ")"
	case errors.Is(err, ticketing.ErrIndeterminate) && strings.Contains(msg, "admin "):
		return msg + " (ticketctl did not send it to another node; see ticketctl status before running it again)"
	case errors.Is(err, context.DeadlineExceeded) && !strings.Contains(msg, "--timeout"):
		return msg + " (raise --timeout?)"
	// TLS on one side only: the client says which side; name the flags.
	case strings.Contains(msg, "this client connects without TLS"):
		return msg + " (ticketctl: add --tls-ca FILE, --tls or --tls-insecure)"
	case strings.Contains(msg, "does not use TLS"):
		return msg + " (ticketctl: leave out --tls, --tls-ca and --tls-insecure)"
	}
	return msg
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `Usage: ticketctl [global flags] COMMAND [arguments and flags]

ticketctl talks to a Ticketing cluster (ticketd).

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-36s %s\n", c.name+" "+c.args, c.summary)
	}
	fmt.Fprintf(w, `
Global flags (before or after the command):
`)
	printFlags(w, func(fs *flag.FlagSet) { defineGlobals(fs, new(globals)) })
	fmt.Fprint(w, `
Flags take one or two dashes and may stand before, between or after the
command's arguments; "--" ends the flags. Durations are Go durations such as
"500ms", "30s" or "1m" (fractions of a second are rounded up).

Output: text by default; -o json prints exactly one JSON object, for errors
{"error": MESSAGE, "code": CODE} (the message also goes to stderr).

Exit codes:
  0  success
  1  any other error: usage, connection, authentication failure (token or
     client certificate) (code "error"); a server of another cluster than
     --cluster-id (code "wrong_cluster")
  2  acquire: not acquired within --wait (code "not_acquired");
     release: the token does not hold the key (code "not_held");
     members add: the server is still a learner after --wait (code
     "learner")
  3  rejected by a server capacity limit (code "capacity")
  4  indeterminate: the answer was lost; an acquire may or may not have
     been granted (code "indeterminate")
  5  permission denied: the token's principal may not do this (an admin
     command without an admin token, a key outside the application's
     prefixes, a ticket granted to another application)
     (code "permission_denied")

Run "ticketctl COMMAND --help" for a command's own flags.
`)
}

func commandUsage(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: ticketctl %s %s\n\n%s\n", c.name, c.args, c.summary)
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.setup(fs)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintf(w, "\nFlags:\n")
		printFlags(w, func(fs *flag.FlagSet) { c.setup(fs) })
	}
	if d, ok := commandDetails[c.name]; ok {
		fmt.Fprintf(w, "\n%s", d)
	}
	fmt.Fprintf(w, "\nGlobal flags and exit codes: ticketctl --help\n")
}

// commandDetails holds the longer help of the commands that need one.
var commandDetails = map[string]string{}

func printFlags(w io.Writer, define func(*flag.FlagSet)) {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	define(fs)
	var lines []string
	fs.VisitAll(func(f *flag.Flag) {
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		name := dash + f.Name
		if !isBoolFlag(f) {
			name += " " + valueName(f)
		}
		line := fmt.Sprintf("  %-22s %s", name, f.Usage)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0s" && f.DefValue != "0" {
			line += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		lines = append(lines, line)
	})
	sort.Strings(lines)
	fmt.Fprintln(w, strings.Join(lines, "\n"))
}

func valueName(f *flag.Flag) string {
	switch f.Value.(type) {
	case interface{ Get() any }:
		if _, ok := f.Value.(flag.Getter).Get().(time.Duration); ok {
			return "DUR"
		}
	}
	switch f.Name {
	case "o":
		return "FORMAT"
	case "addr":
		return "ADDRS"
	case "cluster-id":
		return "ID"
	case "tls-ca", "tls-cert", "tls-key":
		return "FILE"
	}
	return strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
}

// broker connects to the cluster leader through the --addr list.
func (e *env) broker(ctx context.Context) (*ticketing.Broker, error) {
	b, err := ticketing.Connect(e.g.addrs, e.options()...)
	if err != nil {
		return nil, err
	}
	if err := b.WaitReady(ctx); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// onLeader runs an admin operation on the leader. It tries the --addr
// addresses in turn and follows a follower's answer naming the leader. It
// returns the address of the node that performed op.
func (e *env) onLeader(ctx context.Context, op func(context.Context, *ticketing.Admin) error) (string, error) {
	type target struct {
		addr string
		hint bool // named as the leader by a follower
	}
	var queue []target
	for _, a := range e.addrList() {
		queue = append(queue, target{addr: a})
	}
	if len(queue) == 0 {
		return "", usageErrorf("--addr is empty")
	}
	tried := map[string]bool{}
	attempts := len(queue) + 3 // hints may lead back to a tried address once leadership moved
	var lastErr error
	for len(queue) > 0 && attempts > 0 {
		t := queue[0]
		queue = queue[1:]
		if tried[t.addr] && !t.hint {
			continue
		}
		tried[t.addr] = true
		attempts--
		a, err := ticketing.DialAdmin(ctx, t.addr, e.adminOptions()...)
		if err == nil {
			err = op(ctx, a)
			a.Close()
			if err == nil {
				return t.addr, nil
			}
		}
		lastErr = err
		var nl *ticketing.NotLeaderError
		switch {
		case errors.As(err, &nl):
			if nl.LeaderAddr != "" && nl.LeaderAddr != t.addr {
				queue = append([]target{{addr: nl.LeaderAddr, hint: true}}, queue...)
			}
		case ctx.Err() != nil, errors.Is(err, ticketing.ErrUnauthenticated), errors.Is(err, ticketing.ErrInvalidArgument):
			return "", err
		case errors.Is(err, ticketing.ErrIndeterminate):
			// The node may have applied it (a transfer, a removal): sending
			// it to the next node could apply it twice.
			return "", err
		case errors.Is(err, ticketing.ErrUnavailable):
			// that node is unreachable or went away: try the next one
		default:
			return "", err // the leader refused or failed the operation
		}
	}
	return "", fmt.Errorf("no leader found through %s: %w", e.g.addrs, lastErr)
}

// waitingHint explains a server that is no leader and knows none: when it
// is a server waiting to be added to a cluster (no cluster ID, no members),
// it names it and what to run. It asks the servers' status briefly; any
// failure there adds nothing.
func (e *env) waitingHint(err error) string {
	// The client reports the last attempt of a connect in words, so the
	// refusal may be text only.
	var nl *ticketing.NotLeaderError
	if errors.As(err, &nl) {
		if nl.LeaderAddr != "" {
			return ""
		}
	} else if !strings.Contains(err.Error(), "does not know the leader") {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var hints []string
	for _, addr := range e.addrList() {
		a, err := ticketing.DialAdmin(ctx, addr, e.adminOptions()...)
		if err != nil {
			continue
		}
		s, err := a.Status(ctx)
		a.Close()
		if err != nil || len(s.Members) > 0 || (s.ClusterID != "" && s.ClusterID != "none") {
			continue
		}
		hints = append(hints, fmt.Sprintf("%s (node %s) waits to be added to a cluster: on the cluster's leader run "+
			"ticketctl --addr LEADER members add %s RAFT_ADDR (its Raft address); a server meant to run alone "+
			"needs initial_cluster_state = \"new\" with an empty data directory", addr, s.NodeID, s.NodeID))
	}
	if len(hints) == 0 {
		return ""
	}
	return " (" + strings.Join(hints, "; ") + ")"
}
