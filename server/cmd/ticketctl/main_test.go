package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
)

// ctl runs ticketctl in-process and returns its exit code and output.
func ctl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestParseArgs(t *testing.T) {
	type want struct {
		cmd   string
		args  []string
		flags map[string]string // flag name -> parsed value
	}
	tests := []struct {
		name string
		args []string
		want want
	}{
		{
			name: "globals before the command, command flags after",
			args: []string{"--addr", "A:1", "-o", "json", "acquire", "k", "--wait", "0s", "--lease", "30s"},
			want: want{"acquire", []string{"k"}, map[string]string{"addr": "A:1", "o": "json", "wait": "0s", "lease": "30s"}},
		},
		{
			name: "everything after the positional",
			args: []string{"acquire", "k", "--lease", "30s", "--wait", "0s", "-o", "json"},
			want: want{"acquire", []string{"k"}, map[string]string{"addr": defaultAddr, "o": "json", "wait": "0s", "lease": "30s"}},
		},
		{
			name: "flags between the command and its argument",
			args: []string{"acquire", "--lease=1m", "k", "-wait=500ms", "--timeout", "3s"},
			want: want{"acquire", []string{"k"}, map[string]string{"wait": "500ms", "lease": "1m0s", "timeout": "3s"}},
		},
		{
			name: "global flag after positionals",
			args: []string{"release", "k", "42", "--addr=B:2,C:3", "--token", "s3cret"},
			want: want{"release", []string{"k", "42"}, map[string]string{"addr": "B:2,C:3", "token": "s3cret"}},
		},
		{
			name: "client certificate",
			args: []string{"status", "--tls-ca", "ca.pem", "--tls-cert", "c.pem", "--tls-key=c.key"},
			want: want{"status", nil, map[string]string{"tls-ca": "ca.pem", "tls-cert": "c.pem", "tls-key": "c.key"}},
		},
		{
			name: "boolean flag takes no separate value",
			args: []string{"--tls-insecure", "describe", "k"},
			want: want{"describe", []string{"k"}, map[string]string{"tls-insecure": "true"}},
		},
		{
			name: "boolean flag with explicit value",
			args: []string{"describe", "--tls-insecure=false", "k"},
			want: want{"describe", []string{"k"}, map[string]string{"tls-insecure": "false"}},
		},
		{
			name: "double dash ends the flags",
			args: []string{"release", "--", "-odd-key", "7"},
			want: want{"release", []string{"-odd-key", "7"}, map[string]string{"o": "text"}},
		},
		{
			name: "value that looks like a flag",
			args: []string{"describe", "--token", "-x", "k"},
			want: want{"describe", []string{"k"}, map[string]string{"token": "-x"}},
		},
		{
			name: "subcommands are positionals",
			args: []string{"members", "add", "n4", "10.0.0.4:5226", "-o", "json"},
			want: want{"members", []string{"add", "n4", "10.0.0.4:5226"}, map[string]string{"o": "json"}},
		},
		{
			name: "leader transfer without id",
			args: []string{"leader", "transfer"},
			want: want{"leader", []string{"transfer"}, nil},
		},
		{
			name: "status with defaults",
			args: []string{"status"},
			want: want{"status", nil, map[string]string{"addr": defaultAddr, "o": "text", "timeout": "10s", "tls": "false"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := parseArgs(tc.args)
			if err != nil {
				t.Fatalf("parseArgs: %v", err)
			}
			if inv.cmd == nil || inv.cmd.name != tc.want.cmd {
				t.Fatalf("command = %v, want %s", inv.cmd, tc.want.cmd)
			}
			if !reflect.DeepEqual(inv.args, tc.want.args) {
				t.Errorf("args = %q, want %q", inv.args, tc.want.args)
			}
			for name, v := range tc.want.flags {
				f := inv.fs.Lookup(name)
				if f == nil {
					t.Errorf("flag %s not defined", name)
					continue
				}
				if got := f.Value.String(); got != v {
					t.Errorf("--%s = %q, want %q", name, got, v)
				}
			}
		})
	}
}

func TestParseArgsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"-o", "json"}, "no command given"},
		{[]string{"lock", "k"}, `unknown command "lock"`},
		{[]string{"--bogus", "status"}, "unknown flag --bogus"},
		{[]string{"status", "--wait", "1s"}, "unknown flag --wait for status"},
		{[]string{"--lease", "30s", "acquire", "k"}, "flag --lease must come after the command"},
		{[]string{"acquire", "k", "--lease"}, "flag --lease needs a value"},
		{[]string{"acquire", "k", "--lease", "30"}, `invalid value "30" for --lease`},
		{[]string{"acquire", "k", "--wait", "soon", "--lease", "1s"}, `invalid value "soon" for --wait`},
		{[]string{"-o", "yaml", "status"}, `-o "yaml": want text or json`},
		{[]string{"status", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"status", "--tls-ca", "ca.pem", "--tls-insecure"}, "exclusive"},
		{[]string{"status", "--tls-insecure=maybe"}, "invalid boolean value"},
		{[]string{"status", "--tls-ca", "ca.pem", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"status", "--tls", "--tls-key", "c.key"}, "--tls-cert and --tls-key go together"},
		{[]string{"status", "--tls-cert", "c.pem", "--tls-key", "c.key"}, "--tls-cert needs TLS"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseArgs(tc.args)
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a usage error containing %q", err, tc.want)
			}
		})
	}
}

// TestCommandArgumentErrors checks each command's own argument checks; they
// fail before anything is dialled.
func TestCommandArgumentErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"acquire", "--lease", "5s"}, "acquire takes one KEY, got 0 arguments"},
		{[]string{"acquire", "a", "b", "--lease", "5s"}, "acquire takes one KEY, got 2"},
		{[]string{"acquire", "k"}, "acquire needs --lease"},
		{[]string{"release", "k"}, "release takes KEY TOKEN"},
		{[]string{"release", "k", "x1"}, `TOKEN "x1" is not a ticket token`},
		{[]string{"release", "k", "0"}, `TOKEN "0" is not a ticket token`},
		{[]string{"release", "k", "-1"}, "unknown flag -1"},
		{[]string{"release", strings.Repeat("k", 1025), "1"}, "KEY must be 1..1024 bytes, got 1025"},
		{[]string{"release", "", "1"}, "KEY must be 1..1024 bytes, got 0"},
		{[]string{"describe"}, "describe takes one KEY"},
		{[]string{"status", "extra"}, "status takes no arguments"},
		{[]string{"members"}, "members needs a subcommand"},
		{[]string{"members", "add", "n4"}, "members add takes ID RAFTADDR"},
		{[]string{"members", "add", "n4", "nohost"}, `RAFTADDR "nohost" is not host:port`},
		{[]string{"members", "remove"}, "members remove takes one ID"},
		{[]string{"members", "show"}, `unknown members subcommand "show": want add, remove or list`},
		{[]string{"members", "list", "n4"}, "members list takes no arguments"},
		{[]string{"leader"}, "leader needs the subcommand transfer"},
		{[]string{"leader", "transfer", "n1", "n2"}, "leader transfer takes at most one ID"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := ctl(t, append(tc.args, "--addr", "127.0.0.1:1")...)
			if code != exitError {
				t.Errorf("exit code %d, want %d", code, exitError)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "--help") {
				t.Errorf("stderr %q, want %q and a pointer to --help", stderr, tc.want)
			}
		})
	}
}

func TestUsageErrorJSON(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", "json", "describe"}, "describe takes one KEY"},
		{[]string{"describe", "-o", "json"}, "describe takes one KEY"},
		{[]string{"-o", "json", "bogus"}, `unknown command "bogus"`},
		{[]string{"-o=json", "acquire", "k", "--lease", "1s", "--nope"}, "unknown flag --nope"},
		{[]string{"-o", "json", "acquire", "k", "--lease", "soon"}, `invalid value "soon"`},
	} {
		code, stdout, stderr := ctl(t, tc.args...)
		if code != exitError {
			t.Fatalf("%q: exit %d", tc.args, code)
		}
		var got errorResult
		decodeOne(t, stdout, &got)
		if got.Code != "error" || !strings.Contains(got.Error, tc.want) || !strings.Contains(stderr, got.Error) {
			t.Errorf("%q: got %+v, stderr %q", tc.args, got, stderr)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"-o", "json", "-h"}} {
		code, stdout, _ := ctl(t, args...)
		if code != exitOK {
			t.Errorf("%q: exit %d", args, code)
		}
		for _, want := range []string{"Exit codes:", "  2  acquire: not acquired", "  3  rejected by a server capacity limit", "  4  indeterminate", "--addr ADDRS", "members add ID RAFTADDR", "snapshot save FILE"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("%q: help lacks %q:\n%s", args, want, stdout)
			}
		}
	}
	for _, args := range [][]string{{"acquire", "--help"}, {"help", "acquire"}, {"acquire", "k", "-h"}} {
		code, stdout, _ := ctl(t, args...)
		if code != exitOK || !strings.Contains(stdout, "Usage: ticketctl acquire KEY --wait DUR --lease DUR") || !strings.Contains(stdout, "--lease DUR") {
			t.Errorf("%q: exit %d, help:\n%s", args, code, stdout)
		}
	}
}

func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("ticketing: acquire %q: %w", "k", err) }
	tests := []struct {
		name string
		err  error
		code int
		json string
	}{
		{"not acquired", wrap(ticketing.ErrNotAcquired), exitNotAcquired, "not_acquired"},
		{"not held", wrap(ticketing.ErrNotHeld), exitNotAcquired, "not_held"},
		{"capacity sentinel", wrap(ticketing.ErrCapacity), exitCapacity, "capacity"},
		{"capacity error", wrap(&ticketing.CapacityError{Addr: "a:1", Reason: ticketing.CapacityHeld}), exitCapacity, "capacity"},
		{"indeterminate", wrap(ticketing.ErrIndeterminate), exitIndeterminate, "indeterminate"},
		{"indeterminate and closed", wrap(errors.Join(ticketing.ErrIndeterminate, ticketing.ErrClosed)), exitIndeterminate, "indeterminate"},
		{"unauthenticated", wrap(ticketing.ErrUnauthenticated), exitError, "error"},
		{"unauthenticated server error", wrap(&ticketing.ServerError{Addr: "a:1", Code: ticketing.CodeUnauthenticated}), exitError, "error"},
		{"invalid argument", wrap(ticketing.ErrInvalidArgument), exitError, "error"},
		{"unavailable", wrap(ticketing.ErrUnavailable), exitError, "error"},
		{"budget exceeded", wrap(ticketing.ErrBudgetExceeded), exitError, "error"},
		{"not leader", wrap(&ticketing.NotLeaderError{Addr: "a:1"}), exitError, "error"},
		{"admin failure", wrap(&ticketing.AdminError{Addr: "a:1", Op: "members.add", Message: "x"}), exitError, "error"},
		{"deadline", wrap(context.DeadlineExceeded), exitError, "error"},
		{"usage", usageErrorf("bad"), exitError, "error"},
		{"wrapped twice", fmt.Errorf("snapshot save: %w", wrap(ticketing.ErrNotHeld)), exitNotAcquired, "not_held"},
		{"joined", errors.Join(errors.New("x"), wrap(ticketing.ErrIndeterminate)), exitIndeterminate, "indeterminate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, name := classify(tc.err)
			if code != tc.code || name != tc.json {
				t.Errorf("classify = %d %q, want %d %q", code, name, tc.code, tc.json)
			}
		})
	}
	if c, n := classify(nil); c != exitOK || n != "" {
		t.Errorf("classify(nil) = %d %q", c, n)
	}
}

func TestErrorMessages(t *testing.T) {
	auth := errorMessage(fmt.Errorf("connect: %w", ticketing.ErrUnauthenticated))
	if !strings.HasPrefix(auth, "authentication failed") || !strings.Contains(auth, "--token") {
		t.Errorf("authentication message %q", auth)
	}
	dl := errorMessage(fmt.Errorf("connect: %w", context.DeadlineExceeded))
	if !strings.Contains(dl, "--timeout") {
		t.Errorf("deadline message %q", dl)
	}
}

func TestFailOutput(t *testing.T) {
	for _, output := range []string{"text", "json"} {
		var stdout, stderr bytes.Buffer
		e := &env{g: globals{output: output}, stdout: &stdout, stderr: &stderr}
		code := e.fail(fmt.Errorf("acquire: %w", ticketing.ErrNotAcquired))
		if code != exitNotAcquired {
			t.Errorf("%s: exit %d", output, code)
		}
		if !strings.HasPrefix(stderr.String(), "ticketctl: acquire: ticketing: not acquired") {
			t.Errorf("%s: stderr %q", output, stderr.String())
		}
		if output == "text" {
			if stdout.Len() != 0 {
				t.Errorf("text: stdout %q", stdout.String())
			}
			continue
		}
		var got map[string]any
		dec := json.NewDecoder(&stdout)
		if err := dec.Decode(&got); err != nil || dec.More() {
			t.Fatalf("json: stdout is not exactly one object: %v", err)
		}
		if got["code"] != "not_acquired" || !strings.Contains(got["error"].(string), "not acquired") || len(got) != 2 {
			t.Errorf("json: %v", got)
		}
	}
}

func TestTokenFromEnvironment(t *testing.T) {
	t.Setenv(tokenEnv, "from-env")
	inv, err := parseArgs([]string{"status"})
	if err != nil {
		t.Fatal(err)
	}
	// parseArgs itself does not read the environment; run does.
	if inv.g.token != "" {
		t.Errorf("parseArgs token %q", inv.g.token)
	}
}

func TestTimeoutCoversWait(t *testing.T) {
	e := &env{g: globals{timeout: 2 * time.Second}}
	ctx, cancel := e.context(time.Minute)
	defer cancel()
	dl, ok := ctx.Deadline()
	if !ok || time.Until(dl) < time.Minute {
		t.Errorf("deadline %v is not --timeout plus the wait", dl)
	}
}

// TestHelpNoZeroDefaults: a number flag whose zero means "not given" (the
// coordination limits) shows no "(default 0)"; its usage says the real
// default.
func TestHelpNoZeroDefaults(t *testing.T) {
	code, stdout, _ := ctl(t, "coordination", "--help")
	if code != exitOK || strings.Contains(stdout, "(default 0)") {
		t.Errorf("exit %d, help:\n%s", code, stdout)
	}
	for _, want := range []string{"session limit (default 10000)\n", "> 0 (required)\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help lacks %q:\n%s", want, stdout)
		}
	}
}

// TestReferenceDocumentsEveryFlagAndCommand: the ticketctl reference in
// docs/deployment.md names every command, every coordination verb and
// every flag, global or a command's.
func TestReferenceDocumentsEveryFlagAndCommand(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/deployment.md")
	if err != nil {
		t.Fatal(err)
	}
	_, ref, ok := strings.Cut(string(doc), "\n## ticketctl reference\n")
	if !ok {
		t.Fatal("docs/deployment.md has no ticketctl reference section")
	}
	ref, _, _ = strings.Cut(ref, "\n## ")
	mention := func(what, text string) {
		t.Helper()
		if !strings.Contains(ref, text) {
			t.Errorf("the ticketctl reference does not mention %s (%q)", what, text)
		}
	}
	flagText := func(name string) string {
		if len(name) == 1 {
			return "-" + name + " "
		}
		return "--" + name
	}
	var g globals
	gfs := flag.NewFlagSet("", flag.ContinueOnError)
	defineGlobals(gfs, &g)
	gfs.VisitAll(func(f *flag.Flag) { mention("the global flag "+f.Name, flagText(f.Name)) })
	for _, c := range commands {
		mention("the command "+c.name, "  "+c.name+" ")
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		c.setup(fs)
		fs.VisitAll(func(f *flag.Flag) { mention(c.name+"'s flag "+f.Name, flagText(f.Name)) })
	}
	for verb := range coordVerbFlags {
		group, action, _ := strings.Cut(verb, " ")
		listed := false
		for _, l := range strings.Split(ref, "\n") {
			listed = listed || strings.Contains(l, "coordination "+group+" ") && strings.Contains(l, action)
		}
		if !listed {
			t.Errorf("the ticketctl reference does not list coordination %s %s", group, action)
		}
	}
}
