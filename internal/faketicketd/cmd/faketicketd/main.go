// Command faketicketd serves one conformance scenario (testdata/conformance)
// on loopback for the Java and C# runners, which start it as a process:
//
//	faketicketd testdata/conformance/acquire-answer-lost.json
//
// It prints "addr HOST:PORT[,HOST:PORT...]" (the addresses the client is
// given) once listening, then "recv X" for every frame it
// reads from the client (X is the type letter), so that a runner can cancel a
// call once a frame has arrived. A line "check" on its input compares what
// the client sent with the scenario and prints "verdict ok" or "verdict fail
// REASONS"; a line "violations" prints what the script found wrong so far
// ("violations" and the list), for a failed step's message. The command
// ends when its input ends.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ticketing-io/ticketing/internal/faketicketd"
)

// checkPatience bounds the wait for frames the client must still send (a
// background release, say) once its calls have returned.
const checkPatience = 5 * time.Second

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: faketicketd SCENARIO.json")
		os.Exit(2)
	}
	sc, err := faketicketd.LoadScenario(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "faketicketd:", err)
		os.Exit(1)
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	srv, err := faketicketd.ServeScenario(sc, func(r faketicketd.Received) { say("recv %s", r.Frame.Type) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "faketicketd:", err)
		os.Exit(1)
	}
	defer srv.Close()
	say("addr %s", srv.ClientAddr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if strings.TrimSpace(in.Text()) == "violations" {
			say("violations %s", strings.Join(srv.Violations(), "; "))
			continue
		}
		if strings.TrimSpace(in.Text()) != "check" {
			continue
		}
		if err := srv.Check(checkPatience); err != nil {
			say("verdict fail %s", err)
		} else {
			say("verdict ok")
		}
	}
}
