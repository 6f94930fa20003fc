package coordtest_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// frozenChildEnv names the server a re-executed test binary campaigns at
// (see frozenLeader).
const frozenChildEnv = "COORD_FROZEN_LEADER_AT"

// TestFrozenLeaderResumesWithoutLeadership: a leader process frozen
// (SIGSTOP) past its session timeout, while another session takes the
// leadership, finds its session's state not ATTACHED, its session context
// and its leadership context already ended, at the first checks after it
// resumes, before any timer of its own has had to run.
func TestFrozenLeaderResumesWithoutLeadership(t *testing.T) {
	if addr := os.Getenv(frozenChildEnv); addr != "" {
		frozenLeader(addr)
		return
	}
	cl := testcluster.Start(t, 1, productionPings)
	c := newClient(t, cl.AddrList())
	ctx := ctxT(t)
	if err := c.CreateNode(ctx, "/frozen", coordination.NodeConfig{}); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestFrozenLeaderResumesWithoutLeadership$")
	child.Env = append(os.Environ(), frozenChildEnv+"="+cl.AddrList())
	child.Stderr = os.Stderr
	in, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		child.Process.Signal(syscall.SIGCONT)
		child.Process.Kill()
		child.Wait()
	})
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(outPipe)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if l := recv(t, ctx, lines); !strings.HasPrefix(l, "leading") {
		t.Fatalf("the child said %q, want leading", l)
	}
	if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b := session(t, c, "/frozen", coordination.WithTimeout(time.Second))
	lead, err := b.Election("cron").Campaign(ctx, []byte("b"))
	if err != nil {
		t.Fatalf("the other session's campaign: %v", err)
	}
	// The question is waiting when the child resumes: its first act.
	fmt.Fprintln(in, "check")
	if err := child.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if l := recv(t, ctx, lines); !strings.HasPrefix(l, "ended") {
		t.Fatalf("the resumed former leader said %q while session %d leads with token %d: its leadership context was still live", l, b.ID(), lead.Token)
	}
}

// frozenLeader is the child: it campaigns, says "leading", and answers
// every "check" on stdin with the state of its leadership context.
func frozenLeader(addr string) {
	ctx := context.Background()
	b, err := ticketing.Connect(addr)
	if err != nil {
		fmt.Println("error", err)
		return
	}
	defer b.Close()
	c, err := coordination.New(b)
	if err != nil {
		fmt.Println("error", err)
		return
	}
	s, err := c.Session(ctx, "/frozen", coordination.WithTimeout(time.Second))
	if err != nil {
		fmt.Println("error", err)
		return
	}
	lead, err := s.Election("cron").Campaign(ctx, []byte("a"))
	if err != nil {
		fmt.Println("error", err)
		return
	}
	fmt.Println("leading", lead.Token)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		// The first things done after the resume: what a job loop checks
		// before its next unit of work.
		st, sessionErr, leadErr := s.State(), s.Context().Err(), lead.Context.Err()
		if st != coordination.Attached && sessionErr != nil && leadErr != nil {
			fmt.Println("ended", context.Cause(lead.Context))
		} else {
			fmt.Println("live: state", st, "session context", sessionErr, "leadership context", leadErr)
		}
	}
}
