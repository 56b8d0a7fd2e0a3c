package conformance

import (
	"context"
	"sync"
)

// memo computes a fixture once and hands the same value (or error) to every check that needs it.
type memo[T any] struct {
	once sync.Once
	val  T
	err  error
}

func (m *memo[T]) get(ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	m.once.Do(func() { m.val, m.err = f(ctx) })
	return m.val, m.err
}
