package client_test

import (
	"errors"
	"net/http"
	"testing"
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
