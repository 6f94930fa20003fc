package retry

import (
	"errors"
	"fmt"
	"testing"
)

func TestPolicyTable(t *testing.T) {
	rows := []struct {
		class          Class
		name           string
		always, ifIdem bool
		tier           tier
	}{
		{Aborted, "ABORTED", true, true, tierFast},
		{Unavailable, "UNAVAILABLE", true, true, tierFast},
		{Overloaded, "OVERLOADED", true, true, tierSlow},
		{ClientResourceExhausted, "CLIENT_RESOURCE_EXHAUSTED", true, true, tierSlow},
		{BadSession, "BAD_SESSION", true, true, tierNone},
		{Undetermined, "UNDETERMINED", false, true, tierFast},
		{TransportUnavailable, "TRANSPORT_UNAVAILABLE", false, true, tierFast},
		{ClientTransportError, "CLIENT_TRANSPORT_ERROR", false, true, tierFast},
		{SessionExpired, "SESSION_EXPIRED", false, true, tierNone},
		{NonRetryable, "NON_RETRYABLE", false, false, tierNone},
		{Timeout, "TIMEOUT", false, false, tierNone},
		{Canceled, "CANCELED", false, false, tierNone},
		{PreconditionFailed, "PRECONDITION_FAILED", false, false, tierNone},
		{NotFound, "NOT_FOUND", false, false, tierNone},
		{InvalidArgument, "INVALID_ARGUMENT", false, false, tierNone},
	}
	if len(rows) != len(classNames) {
		t.Fatalf("table has %d rows, package has %d classes", len(rows), len(classNames))
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			if got := r.class.String(); got != r.name {
				t.Errorf("String() = %q", got)
			}
			if got := r.class.Retryable(false); got != r.always {
				t.Errorf("Retryable(false) = %v, want %v", got, r.always)
			}
			if got := r.class.Retryable(true); got != r.ifIdem {
				t.Errorf("Retryable(true) = %v, want %v", got, r.ifIdem)
			}
			if r.ifIdem {
				if got := r.class.tier(); got != r.tier {
					t.Errorf("tier = %v, want %v", got, r.tier)
				}
			}
			// An error reporting the class explicitly is classified as it says.
			if got := Classify(fmt.Errorf("wrapped: %w", WithClass(errors.New("x"), r.class))); got != r.class {
				t.Errorf("Classify(WithClass) = %v", got)
			}
		})
	}
	if got := Class(99).String(); got != "Class(99)" {
		t.Errorf("unknown class String() = %q", got)
	}
}

// TestPolicyTable checks every row of the policy table in the package doc.
// clientError stands in for the Ticketing client's error types, which report
// their class through RetryClasser.
type clientError struct {
	msg   string
	class Class
}

func (e *clientError) Error() string     { return e.msg }
func (e *clientError) RetryClass() Class { return e.class }
