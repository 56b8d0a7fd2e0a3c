package client_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask/client"
)

// A Retry-After may be an HTTP date as well as seconds (RFC 9110 §10.2.3); a gateway or proxy in
// front of the service may send either, and the TypeScript and Python clients read both. The
// date form was read as 0, so a 429's APIError.RetryAfter said "now" and a 503's retries came
// sooner than asked.
func TestRetryAfterAsAnHTTPDate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header string
		lo, hi time.Duration
	}{
		{"seconds", "7", 7 * time.Second, 7 * time.Second},
		{"a date an hour ahead", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat), 58 * time.Minute, time.Hour},
		{"a date in the past", time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat), 0, 0},
		{"unreadable", "soon", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := fakeAPI(t, 429, "application/problem+json", `{"type":"about:blank","title":"Too Many Requests","status":429}`, map[string]string{"Retry-After": tc.header})
			_, err := c.CreateConversation(t.Context())
			var apiErr *client.APIError
			if !errors.As(err, &apiErr) || !errors.Is(err, client.ErrTooManyRequests) {
				t.Fatalf("got %v, want a 429", err)
			}
			if got := apiErr.RetryAfter; got < tc.lo || got > tc.hi {
				t.Errorf("Retry-After %q: RetryAfter %v, want within [%v, %v]", tc.header, got, tc.lo, tc.hi)
			}
		})
	}
}

// A refusal whose body says it is JSON but is not the contract's problem (a gateway's page
// mislabelled) is still a refusal with its status, reported at once: the generated parser's
// error was taken for a failed connection, retried eight times and then returned without the
// status.
func TestRefusalTheParserCannotReadKeepsItsStatus(t *testing.T) {
	c, seen := fakeAPI(t, 413, "application/json", `<html>413 Request Entity Too Large</html>`, nil)
	_, err := c.Ask(t.Context(), "cv", "q")
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 413 || apiErr.Problem != nil {
		t.Fatalf("got %v, want a bare 413", err)
	}
	if n := len(*seen); n != 1 {
		t.Errorf("%d requests, want 1: a 413 is not retried", n)
	}
}

// A 503 whose Retry-After is longer than the call will wait (Retry.MaxRetryAfter, or past ctx's
// deadline) ends the call at once with that 503 and its RetryAfter. The client slept the hour
// (or, past a deadline, until the deadline and then said the service had not answered): `ask`
// against a store that answered 503 + Retry-After: 3600 to createConversation sat silent after
// one "request retrying … delay=1h0m0s" line. A number of seconds too large for a Duration
// wrapped round to a negative wait and was retried at once, eight times.
func TestRetryAfterLongerThanTheCallWaitsEndsIt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		header   string
		deadline time.Duration // 0: none
		want     time.Duration
	}{
		{"an hour", "3600", 0, time.Hour},
		{"past the deadline", "40", 30 * time.Second, 40 * time.Second},
		{"wraps a Duration", "10000000000", 0, time.Duration(math.MaxInt64 / time.Second * time.Second)},
		{"beyond an int64", "99999999999999999999", 0, time.Duration(math.MaxInt64 / time.Second * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, seen := fakeAPI(t, 503, "application/problem+json", `{"type":"about:blank","title":"Service Unavailable","status":503}`, map[string]string{"Retry-After": tc.header})
				ctx := t.Context()
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					defer cancel()
				}
				start := time.Now()
				_, err := c.CreateConversation(ctx)
				var apiErr *client.APIError
				if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 {
					t.Fatalf("got %v, want the 503", err)
				}
				if apiErr.RetryAfter != tc.want {
					t.Errorf("RetryAfter %v, want %v", apiErr.RetryAfter, tc.want)
				}
				if n, took := len(*seen), time.Since(start); n != 1 || took != 0 {
					t.Errorf("%d requests over %v, want one and the 503 at once", n, took)
				}
			})
		})
	}
	// Within the bound, the wait is honoured and the call retried.
	synctest.Test(t, func(t *testing.T) {
		c, seen := fakeAPI(t, 503, "application/problem+json", `{"type":"about:blank","title":"Service Unavailable","status":503}`, map[string]string{"Retry-After": "10"})
		start := time.Now()
		_, err := c.CreateConversation(t.Context())
		if n, took := len(*seen), time.Since(start); err == nil || n != 8 || took < 70*time.Second {
			t.Errorf("Retry-After 10: %d requests over %v (%v), want 8, at least 10 s apart", n, took, err)
		}
	})
}
