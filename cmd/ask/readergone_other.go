//go:build !unix

package main

import "context"

// untilReaderGone is ctx: without SIGPIPE, a write to a reader that has gone fails, and the
// command goes on to the run's end.
func untilReaderGone(ctx context.Context, _ ...int) (_ context.Context, stop func()) {
	return ctx, func() {}
}
