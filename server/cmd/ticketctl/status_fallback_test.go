package main

import (
	"net"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/testsupport/testcluster"
)

// TestStatusFallsBackToNextAddr: status answers from the first reachable
// --addr node instead of failing when the first one is down.
func TestStatusFallsBackToNextAddr(t *testing.T) {
	c := testcluster.Start(t, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close() // nothing listens there now
	var st statusResult
	decodeOne(t, mustCtl(t, exitOK, "--addr", down+","+c.Addr(0), "-o", "json", "status"), &st)
	if st.Role != "leader" || st.NodeID == "" {
		t.Fatalf("status %+v", st)
	}
	// Every address down: an error naming them.
	mustCtl(t, exitError, "--addr", down, "status")
}
