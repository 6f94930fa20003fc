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
}
