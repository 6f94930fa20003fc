package transport

import "sync"

// A front is the public type a client's user holds: a *ticketing.Broker.
// coordination.New takes one and uses its client, so the broker registers
// its client here when it is created and removes it when it is closed.
// Packages find a front's client by the front's pointer; neither front's
// public API shows the client.
var fronts sync.Map // front -> *Client

// Register records c as the client of front (a pointer).
func Register(front any, c *Client) { fronts.Store(front, c) }

// Unregister forgets front's client: the front was closed.
func Unregister(front any) { fronts.Delete(front) }

// Of returns the client of front, false when front is not a registered
// front (nil, not made by its constructor, or closed).
func Of(front any) (*Client, bool) {
	c, ok := fronts.Load(front)
	if !ok {
		return nil, false
	}
	return c.(*Client), true
}
