// Package console is ticketd's read-only operator's console: server-rendered
// pages (html/template, assets embedded, no script) of the cluster, the held
// tickets, the coordination nodes and the latest refusals. The server
// supplies the views (on a follower, read from the leader) and decides who
// may look; this package renders them and sets the security headers of
// every response. docs/deployment.md (Operator's console) is the guide.
package console
