// Command recipeinterop holds a Mutex, leads an Election, registers with a
// Discovery and publishes a Publication of the Go SDK on a real server, for
// the other clients' interoperation tests: a Java (or C#) process checks
// that it sees the same lock, leader, service members and value on the same
// node, takes the lock and the leadership over once this process lets go,
// and this process reads back what the other one registered and published.
//
//	recipeinterop ADDRS NODE NAME
//
// It prints "locked TOKEN" once it holds the mutex NAME, "leading TOKEN"
// once it leads the election NAME, "registered TOKEN" once it is a member
// of the service NAME with the endpoint "go", and "published" once the
// publication NAME holds "from-go"; then it waits for a line on its input.
// It then unlocks, resigns, prints "config VALUE" (the publication's value
// now), "endpoints A,B,..." (the service's endpoints in registration
// order), "released", and exits when its input ends.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
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
	reg, err := s.Discovery(name).Register(ctx, []byte("go"))
	if err != nil {
		return err
	}
	fmt.Println("registered", reg.Token())
	if err := s.Publication(name).Publish(ctx, []byte("from-go")); err != nil {
		return err
	}
	fmt.Println("published")
	in := bufio.NewScanner(os.Stdin)
	in.Scan()
	if err := m.Unlock(ctx); err != nil {
		return err
	}
	if err := e.Resign(ctx); err != nil {
		return err
	}
	v, err := s.Publication(name).Get(ctx)
	if err != nil {
		return err
	}
	fmt.Println("config", string(v))
	eps, err := s.Discovery(name).List(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, ep := range eps {
		names = append(names, string(ep.Data))
	}
	fmt.Println("endpoints", strings.Join(names, ","))
	fmt.Println("released")
	_, err = io.Copy(io.Discard, os.Stdin) // until the input ends
	return err
}
