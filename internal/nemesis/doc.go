// Package nemesis is a Jepsen-style fault-injection harness for ticketd.
package nemesis
