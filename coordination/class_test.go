package coordination_test

import (
	"fmt"
	"testing"

	"github.com/ticketing-io/ticketing/coordination"
	"github.com/ticketing-io/ticketing/internal/wire"
	"github.com/ticketing-io/ticketing/retry"
)

// Each status error names the retry class of the same-named YDB status;
// statuses without one are not retried.
func TestStatusRetryClasses(t *testing.T) {
	for _, c := range []struct {
		status uint16
		want   retry.Class
	}{
		{wire.CoordNotFound, retry.NotFound},
		{wire.CoordAlreadyExists, retry.NonRetryable},
		{wire.CoordBadRequest, retry.InvalidArgument},
		{wire.CoordPreconditionFailed, retry.PreconditionFailed},
		{wire.CoordAborted, retry.Aborted},
		{wire.CoordSessionExpired, retry.SessionExpired},
		{wire.CoordBadSession, retry.BadSession},
		{wire.CoordUnauthorized, retry.NonRetryable},
		{wire.CoordLimitExceeded, retry.NonRetryable},
	} {
		err := fmt.Errorf("in the body: %w", &coordination.StatusError{Op: "acquire", Status: c.status, Message: "m"})
		if got := retry.Classify(err); got != c.want {
			t.Errorf("%s: class %v, want %v", wire.CoordStatusName(c.status), got, c.want)
		}
	}
}
