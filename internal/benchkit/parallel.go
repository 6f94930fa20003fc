package benchkit

import (
	"context"
	"sync"
	"sync/atomic"
)

// Parallel runs f(0..n-1) on at most par goroutines and returns the first
// error (after running every item, unless ctx ends, whose error it returns
// if no item failed).
func Parallel(ctx context.Context, n, par int, f func(i int) error) error {
	par = min(par, n)
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { firstErr = err })
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}
