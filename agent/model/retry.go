package model

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how an adapter retries transient failures (rate limited, overloaded). The
// SDKs' own retries are switched off so that one policy, bounded by the run's deadline, applies
// to every provider, including failures that arrive mid-stream.
type RetryPolicy struct {
	// MaxRetries is how many times a call is retried after the first attempt; negative means
	// never, zero means the default (2).
	MaxRetries int
	// BaseDelay is the first backoff; it doubles per retry with full jitter. Zero means 500ms.
	BaseDelay time.Duration
	// MaxDelay caps one backoff. A provider's Retry-After longer than it is not cut short
	// (coming back early would only be refused again): the call fails at once. Zero means 20s.
	MaxDelay time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxRetries == 0 {
		p.MaxRetries = 2
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 500 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 20 * time.Second
	}
	return p
}

// Do runs call until it succeeds, fails with an error that is not a retryable *Error, runs
// out of retries, or the next attempt may not be made in time: waiting for it would pass ctx's
// deadline, or the provider's Retry-After asks for longer than MaxDelay. The usage of
// every attempt is summed into the returned Response, since failed attempts mid-stream are
// billed too.
func (p RetryPolicy) Do(ctx context.Context, call func(context.Context) (Response, error)) (Response, error) {
	p = p.withDefaults()
	var spent Usage
	for attempt := 0; ; attempt++ {
		resp, err := call(ctx)
		resp.Usage.InputTokens += spent.InputTokens
		resp.Usage.OutputTokens += spent.OutputTokens
		if err == nil {
			return resp, nil
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return resp, ctxErr
		}
		var me *Error
		if !errors.As(err, &me) || !me.Retryable() || p.MaxRetries < 0 || attempt >= p.MaxRetries {
			return resp, err
		}
		spent = resp.Usage
		if me.RetryAfter > p.MaxDelay {
			return resp, err
		}
		wait := p.backoff(attempt, me.RetryAfter)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return resp, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return resp, ctx.Err()
		case <-t.C:
		}
	}
}

// backoff is exponential with full jitter, capped, or the provider's hint when it gave one
// (which Do never lets pass MaxDelay).
func (p RetryPolicy) backoff(attempt int, hint time.Duration) time.Duration {
	if hint > 0 {
		return hint
	}
	ceil := min(p.BaseDelay<<attempt, p.MaxDelay)
	return time.Duration(rand.Int64N(int64(ceil)) + 1)
}
