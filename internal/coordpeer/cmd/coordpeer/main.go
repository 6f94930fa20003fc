// Command coordpeer is a Go coordination session driven line by line on
// stdin, for the other clients' interoperability tests: a C# or Java test
// starts it against the same ticketd and checks that a mutex, an election,
// a service's members and a published value are one and the same across
// languages. It creates the node when it does not exist yet.
//
//	coordpeer -addr 127.0.0.1:5225 -node /interop
//
// Commands (one a line), each answered with one line on stdout:
//
//	session               session <id>
//	trylock <name>        locked <token> | busy
//	lock <name>           locked <token>
//	unlock <name>         unlocked
//	campaign <name> <d>   leading <token>
//	resign <name>         resigned
//	leader <name>         leader <session> <token> <data>
//	register <name> <e>   registered <token>
//	deregister <name>     deregistered
//	endpoints <name>      endpoints [<session>:<token>:<endpoint> ...]
//	publish <name> <v>    published
//	get <name>            value <v> | unset
//
// An error is answered "error <text>"; end of input stops the session.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
)

func main() {
	addr := flag.String("addr", "", "ticketd addresses, comma-separated")
	node := flag.String("node", "", "the coordination node's path")
	flag.Parse()
	if *addr == "" || *node == "" {
		fmt.Fprintln(os.Stderr, "coordpeer: -addr and -node are required")
		os.Exit(2)
	}
	ctx := context.Background()
	b, err := ticketing.Connect(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "coordpeer:", err)
		os.Exit(1)
	}
	defer b.Close()
	c, err := coordination.New(b)
	if err != nil {
		fmt.Fprintln(os.Stderr, "coordpeer:", err)
		os.Exit(1)
	}
	start, cancel := context.WithTimeout(ctx, 20*time.Second)
	var s *coordination.Session
	err = c.CreateNode(start, *node, coordination.NodeConfig{})
	if err == nil || errors.Is(err, coordination.ErrAlreadyExists) {
		s, err = c.Session(start, *node, coordination.WithTimeout(10*time.Second))
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "coordpeer:", err)
		os.Exit(1)
	}
	defer func() {
		if err := s.Close(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "coordpeer: close session:", err)
		}
	}()
	mutexes := map[string]*coordination.Mutex{}
	elections := map[string]*coordination.Election{}
	mutex := func(n string) *coordination.Mutex {
		if mutexes[n] == nil {
			mutexes[n] = s.Mutex(n)
		}
		return mutexes[n]
	}
	election := func(n string) *coordination.Election {
		if elections[n] == nil {
			elections[n] = s.Election(n)
		}
		return elections[n]
	}
	registrations := map[string]*coordination.Lease{}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		arg := func(i int) string {
			if i < len(f) {
				return f[i]
			}
			return ""
		}
		var out string
		switch f[0] {
		case "session":
			out = fmt.Sprintf("session %d", s.ID())
		case "trylock":
			m := mutex(arg(1))
			ok, err := m.TryLock(ctx)
			switch {
			case err != nil:
				out = "error " + err.Error()
			case ok:
				out = fmt.Sprintf("locked %d", m.Token())
			default:
				out = "busy"
			}
		case "lock":
			m := mutex(arg(1))
			if err := m.Lock(ctx); err != nil {
				out = "error " + err.Error()
			} else {
				out = fmt.Sprintf("locked %d", m.Token())
			}
		case "unlock":
			if err := mutex(arg(1)).Unlock(ctx); err != nil {
				out = "error " + err.Error()
			} else {
				out = "unlocked"
			}
		case "campaign":
			l, err := election(arg(1)).Campaign(ctx, []byte(arg(2)))
			if err != nil {
				out = "error " + err.Error()
			} else {
				out = fmt.Sprintf("leading %d", l.Token)
			}
		case "resign":
			if err := election(arg(1)).Resign(ctx); err != nil {
				out = "error " + err.Error()
			} else {
				out = "resigned"
			}
		case "leader":
			li, err := election(arg(1)).Leader(ctx)
			if err != nil {
				out = "error " + err.Error()
			} else {
				out = fmt.Sprintf("leader %d %d %s", li.Session, li.Token, li.Data)
			}
		case "register":
			l, err := s.Discovery(arg(1)).Register(ctx, []byte(arg(2)))
			if err != nil {
				out = "error " + err.Error()
			} else {
				registrations[arg(1)] = l
				out = fmt.Sprintf("registered %d", l.Token())
			}
		case "deregister":
			l := registrations[arg(1)]
			delete(registrations, arg(1))
			if l == nil {
				out = "error not registered in " + arg(1)
			} else if err := l.Release(ctx); err != nil {
				out = "error " + err.Error()
			} else {
				out = "deregistered"
			}
		case "endpoints":
			eps, err := s.Discovery(arg(1)).List(ctx)
			if err != nil {
				out = "error " + err.Error()
			} else {
				out = "endpoints"
				for _, e := range eps {
					out += fmt.Sprintf(" %d:%d:%s", e.Session, e.Token, e.Data)
				}
			}
		case "publish":
			if err := s.Publication(arg(1)).Publish(ctx, []byte(arg(2))); err != nil {
				out = "error " + err.Error()
			} else {
				out = "published"
			}
		case "get":
			v, err := s.Publication(arg(1)).Get(ctx)
			switch {
			case errors.Is(err, coordination.ErrNotFound):
				out = "unset"
			case err != nil:
				out = "error " + err.Error()
			default:
				out = "value " + string(v)
			}
		default:
			out = "error unknown command " + f[0]
		}
		fmt.Println(out)
	}
}
