package bench

import (
	"context"
	"sync"
)

// parallel runs f(ctx, i) for i in [0, n) on n goroutines and returns the first error; the
// first error cancels the others' context. It returns once every f has.
func parallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i := range n {
		wg.Go(func() {
			if err := f(ctx, i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		})
	}
	wg.Wait()
	return first
}
