package model_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask/agent/model"
)

// attempts returns a call that fails with errs in order, then succeeds; every attempt costs
// 10 input tokens.
func attempts(n *int, errs ...error) func(context.Context) (model.Response, error) {
	return func(context.Context) (model.Response, error) {
		*n++
		r := model.Response{Usage: model.Usage{InputTokens: 10}}
		if *n <= len(errs) {
			return r, errs[*n-1]
		}
		r.Text = "ok"
		return r, nil
	}
}

var (
	overloaded  = &model.Error{Kind: model.KindOverloaded}
	rateLimited = &model.Error{Kind: model.KindRateLimited, RetryAfter: 7 * time.Second}
)

func TestRetryHonoursRetryAfterAndSumsUsage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n int
		start := time.Now()
		resp, err := model.RetryPolicy{MaxRetries: 3}.Do(t.Context(), attempts(&n, rateLimited, rateLimited))
		if err != nil || resp.Text != "ok" {
			t.Fatalf("resp = %+v, err = %v", resp, err)
		}
		if got := time.Since(start); got != 14*time.Second {
			t.Errorf("waited %v, want 2 × the 7s Retry-After", got)
		}
		if n != 3 || resp.Usage.InputTokens != 30 {
			t.Errorf("attempts = %d, input tokens = %d; want 3 and 30", n, resp.Usage.InputTokens)
		}
	})
}

func TestRetryBackoffIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n int
		start := time.Now()
		p := model.RetryPolicy{MaxRetries: 2, BaseDelay: time.Second, MaxDelay: 1500 * time.Millisecond}
		_, err := p.Do(t.Context(), attempts(&n, overloaded, overloaded, overloaded))
		if !errors.Is(err, overloaded) || n != 3 {
			t.Fatalf("err = %v after %d attempts, want overloaded after 3", err, n)
		}
		if got := time.Since(start); got <= 0 || got > 2500*time.Millisecond {
			t.Errorf("waited %v, want (0, 1s + 1.5s]", got)
		}
	})
}

func TestRetryNeverWaitsPastTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		var n int
		start := time.Now()
		_, err := model.RetryPolicy{MaxRetries: 3}.Do(ctx, attempts(&n, rateLimited))
		if model.KindOf(err) != model.KindRateLimited || n != 1 {
			t.Fatalf("err = %v after %d attempts, want the 429 at once", err, n)
		}
		if got := time.Since(start); got != 0 {
			t.Errorf("waited %v, want no wait: the 7s hint does not fit in 5s", got)
		}
	})
}

// A Retry-After beyond MaxDelay is not cut short: coming back before the provider asked would
// only be refused again. The call fails at once, rate limited, and the run says so then.
func TestRetryAfterBeyondMaxDelayIsNotCutShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n int
		start := time.Now()
		p := model.RetryPolicy{MaxRetries: 3, MaxDelay: 20 * time.Second}
		_, err := p.Do(t.Context(), attempts(&n, &model.Error{Kind: model.KindRateLimited, RetryAfter: time.Minute}))
		if model.KindOf(err) != model.KindRateLimited || n != 1 {
			t.Fatalf("err = %v after %d attempts, want the 429 after 1", err, n)
		}
		if got := time.Since(start); got != 0 {
			t.Errorf("waited %v, want no wait: the provider asked for a minute, more than MaxDelay", got)
		}
	})
}

func TestRetryStopsOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var n int
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		_, err := model.RetryPolicy{MaxRetries: 3}.Do(ctx, attempts(&n, rateLimited, rateLimited))
		if !errors.Is(err, context.Canceled) || n != 1 {
			t.Errorf("err = %v after %d attempts, want context.Canceled after 1", err, n)
		}
	})
}

func TestNotRetried(t *testing.T) {
	for _, err := range []error{
		&model.Error{Kind: model.KindRefused},
		&model.Error{Kind: model.KindContentFilter},
		&model.Error{Kind: model.KindRejected, Status: 400},
		&model.Error{Kind: model.KindTransport},
		errors.New("anything else"),
	} {
		var n int
		_, got := model.RetryPolicy{MaxRetries: 3}.Do(t.Context(), attempts(&n, err))
		if !errors.Is(got, err) || n != 1 {
			t.Errorf("%v: %d attempts, err %v; want 1 and the error", err, n, got)
		}
	}
	var n int
	if _, err := (model.RetryPolicy{MaxRetries: -1}).Do(t.Context(), attempts(&n, overloaded)); err == nil || n != 1 {
		t.Errorf("MaxRetries -1: %d attempts, want 1", n)
	}
}

func TestStatusKindAndRetryAfter(t *testing.T) {
	for status, want := range map[int]model.Kind{429: model.KindRateLimited, 500: model.KindOverloaded, 529: model.KindOverloaded, 400: model.KindRejected, 401: model.KindRejected} {
		if got := model.StatusKind(status); got != want {
			t.Errorf("StatusKind(%d) = %s, want %s", status, got, want)
		}
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{"": 0, "3": 3 * time.Second, "0.5": 500 * time.Millisecond, "junk": 0, "Sun, 29 Nov 2026 12:00:10 GMT": 10 * time.Second,
		"1e10": math.MaxInt64, "Inf": math.MaxInt64, "NaN": 0, "-3": 0} {
		h := http.Header{}
		if v != "" {
			h.Set("Retry-After", v)
		}
		if got := model.RetryAfter(h, now); got != want {
			t.Errorf("RetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
	// The providers' millisecond header comes first, as their SDKs read it.
	for _, tt := range []struct {
		ms, s string
		want  time.Duration
	}{
		{"5000", "", 5 * time.Second},
		{"1500", "2", 1500 * time.Millisecond},
		{"junk", "2", 2 * time.Second},
		{"0", "2", 2 * time.Second},
	} {
		h := http.Header{}
		h.Set("retry-after-ms", tt.ms)
		if tt.s != "" {
			h.Set("Retry-After", tt.s)
		}
		if got := model.RetryAfter(h, now); got != tt.want {
			t.Errorf("RetryAfter(retry-after-ms %q, Retry-After %q) = %v, want %v", tt.ms, tt.s, got, tt.want)
		}
	}
}

// Error() shows only the fixed vocabulary, whatever an adapter put in Message or Kind.
func TestErrorShowsOnlyTheVocabulary(t *testing.T) {
	for _, tt := range []struct {
		e    model.Error
		want string
	}{
		{model.Error{Kind: model.KindRejected, Status: 400, Message: "invalid request"}, "model rejected (HTTP 400): invalid request"},
		{model.Error{Kind: model.KindRejected, Status: 400, Message: "you asked: how many sev1?"}, "model rejected (HTTP 400): provider error"},
		{model.Error{Kind: "sk-secret", Message: "the model refused"}, "model transport: the model refused"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}
