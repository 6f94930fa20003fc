// Command recipeinterop holds a Mutex and leads an Election of the Go SDK
// on a real server, for the other clients' interoperation tests: a Java
// (or C#) process checks that it sees the same lock and leader on the same
// node, and takes them over once this process lets go.
//
//	recipeinterop ADDRS NODE NAME
//
// It prints "locked TOKEN" once it holds the mutex NAME and "leading TOKEN"
// once it leads the election NAME, then waits for a line on its input;
// it then unlocks, resigns, prints "released" and exits when its input ends.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "recipeinterop:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) != 4 {
		return errors.New("usage: recipeinterop ADDRS NODE NAME")
	}
	addrs, node, name := os.Args[1], os.Args[2], os.Args[3]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := ticketing.Connect(addrs)
	if err != nil {
		return err
	}
	defer b.Close()
	c, err := coordination.New(b)
	if err != nil {
		return err
	}
	if err := c.CreateNode(ctx, node, coordination.NodeConfig{}); err != nil && !errors.Is(err, coordination.ErrAlreadyExists) {
		return err
	}
	s, err := c.Session(ctx, node, coordination.WithTimeout(10*time.Second))
	if err != nil {
		return err
	}
	defer func() {
		if err := s.Close(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "recipeinterop: close session:", err)
		}
	}()
	m := s.Mutex(name)
	if err := m.Lock(ctx); err != nil {
		return err
	}
	fmt.Println("locked", m.Token())
	e := s.Election(name)
	lead, err := e.Campaign(ctx, []byte("go"))
	if err != nil {
		return err
	}
	fmt.Println("leading", lead.Token)
	in := bufio.NewScanner(os.Stdin)
	in.Scan()
	if err := m.Unlock(ctx); err != nil {
		return err
	}
	if err := e.Resign(ctx); err != nil {
		return err
	}
	fmt.Println("released")
	_, err = io.Copy(io.Discard, os.Stdin) // until the input ends
	return err
}
