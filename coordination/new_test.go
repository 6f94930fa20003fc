package coordination_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing"
	"github.com/ticketing-io/ticketing/coordination"
)

// TestNewRefusesConnectionOptions: over a broker, the connection is the
// broker's: this package's connection options are refused, naming them,
// and so is a nil broker.
func TestNewRefusesConnectionOptions(t *testing.T) {
	if _, err := coordination.New(nil); !errors.Is(err, coordination.ErrBadRequest) {
		t.Fatalf("New(nil): %v, want ErrBadRequest", err)
	}
	b, err := ticketing.Connect("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = coordination.New(b, coordination.WithToken("x"), coordination.WithDialTimeout(1))
	if !errors.Is(err, coordination.ErrBadRequest) || !strings.Contains(err.Error(), "WithToken, WithDialTimeout") || !strings.Contains(err.Error(), "ticketing.Connect") {
		t.Fatalf("New with connection options: %v", err)
	}
}

// TestDialRefusesBadConfiguration: the deprecated constructor reports the
// Ticketing client's configuration errors as BAD_REQUEST.
func TestDialRefusesBadConfiguration(t *testing.T) {
	for _, addrs := range []string{"", " , ", "host:0", "host:99999"} {
		if _, err := coordination.Dial(addrs); !errors.Is(err, coordination.ErrBadRequest) { //nolint:staticcheck // the deprecated constructor keeps working
			t.Errorf("Dial(%q): %v, want ErrBadRequest", addrs, err)
		}
	}
	for name, o := range map[string]coordination.Option{
		"a token over 1024 bytes": coordination.WithToken(strings.Repeat("t", 1025)),
		"a negative dial timeout": coordination.WithDialTimeout(-1),
	} {
		if _, err := coordination.Dial("127.0.0.1:1", o); !errors.Is(err, coordination.ErrBadRequest) { //nolint:staticcheck // the deprecated constructor keeps working
			t.Errorf("Dial with %s: %v, want ErrBadRequest", name, err)
		}
	}
}

// TestNewOverAClosedBroker: a closed broker (or one not made by
// ticketing.Connect) has no connection layer to share: New says so with
// ErrClosed rather than failing on the first request.
func TestNewOverAClosedBroker(t *testing.T) {
	b, err := ticketing.Connect("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := coordination.New(b)
	if err != nil {
		t.Fatalf("New over an open broker: %v", err)
	}
	defer c.Close()
	b.Close()
	if _, err := coordination.New(b); !errors.Is(err, coordination.ErrClosed) || !strings.Contains(err.Error(), "closed") {
		t.Errorf("New over a closed broker: %v, want ErrClosed", err)
	}
	if _, err := coordination.New(&ticketing.Broker{}); !errors.Is(err, coordination.ErrClosed) {
		t.Errorf("New over a broker not made by Connect: %v, want ErrClosed", err)
	}
}
