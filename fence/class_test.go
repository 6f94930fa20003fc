package fence_test

import (
	"fmt"
	"testing"

	"github.com/ticketing-io/ticketing/fence"
	"github.com/ticketing-io/ticketing/retry"
)

// A fence refusal names its retry class, PRECONDITION_FAILED, also through
// wrapping, and is never retried.
func TestRefusalsArePreconditionFailed(t *testing.T) {
	for _, err := range []error{
		&fence.StaleError{Key: "k", Token: 3, Mark: 5},
		&fence.TokenCommittedError{Key: "k", Token: 5},
		fmt.Errorf("transfer: %w", &fence.StaleError{Key: "k", Token: 3, Mark: 5}),
	} {
		c := retry.Classify(err)
		if c != retry.PreconditionFailed || c.Retryable(true) {
			t.Errorf("%v: class %v, want PRECONDITION_FAILED, never retried", err, c)
		}
	}
}
