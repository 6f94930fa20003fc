package retry_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/ticketing-io/ticketing/retry"
)

func ExampleDo() {
	attempts := 0
	err := retry.Do(context.Background(), func(ctx context.Context) error {
		// Begin, work and commit a whole transaction here.
		attempts++
		if attempts < 3 {
			return retry.WithClass(errors.New("session lost"), retry.BadSession)
		}
		return nil
	}, retry.Idempotent(true))
	fmt.Println(attempts, err)
	// Output: 3 <nil>
}

func ExamplePolicy_Do() {
	cfg := retry.DefaultConfig()
	cfg.MaxAttempts = 2
	p := retry.Policy{Config: &cfg}
	err := p.Do(context.Background(), func(ctx context.Context) error {
		return retry.WithClass(errors.New("session lost"), retry.BadSession)
	})
	var re *retry.Error
	fmt.Println(errors.As(err, &re), re.Attempts)
	fmt.Println(err)
	// Output:
	// true 2
	// retry: failed after 2 attempts (BAD_SESSION): session lost
}
