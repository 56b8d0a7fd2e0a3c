package client_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/internal/memnet"
)

// loseFirstReply is a transport whose first request reaches the service, which acts on it,
// and whose reply is lost (the connection reset); the others pass.
type loseFirstReply struct {
	next  http.RoundTripper
	calls atomic.Int32
	err   error // what the first request fails with
}

func (l *loseFirstReply) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if l.calls.Add(1) == 1 {
		if resp != nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return nil, l.err
	}
	return resp, err
}

// A create whose first attempt's reply was lost, and whose retries then fail for good (a store
// that answers 503 to each), may have been made all the same: the error says so and matches
// ErrMayHaveBeenMade, with its 503. It read "503 Service Unavailable" alone: `ask` said the
// service refused the request while the ticket of the first attempt ran, and asking again asked
// twice. A failure with no lost reply, or with a connection never made, says nothing of the kind.
func TestCreateAfterALostReplyMayHaveBeenMade(t *testing.T) {
	var posts atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if posts.Add(1) == 1 {
			// the first attempt: made, and the reply is lost on the way back
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"ticket":"tk","conversation_id":"cv","events_url":"e","status_url":"s","cancel_url":"c","created_at":"2026-11-29T20:00:00Z"}`)
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"type":"about:blank","title":"Service Unavailable","status":503}`)
	})
	for _, tc := range []struct {
		name    string
		lostErr error // the first request's transport error; nil: no lost reply
		want    bool
	}{
		{"a reset after the request", syscall.ECONNRESET, true},
		{"no lost reply", nil, false},
		{"a connection refused", syscall.ECONNREFUSED, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			posts.Store(0)
			var rt http.RoundTripper = memnet.Transport{Handler: h}
			if tc.lostErr != nil {
				rt = &loseFirstReply{next: rt, err: tc.lostErr}
			} else {
				posts.Store(1) // every attempt is answered 503
			}
			c, err := client.New("http://ask.test/ask", client.Options{HTTPClient: &http.Client{Transport: rt}, Retry: quick})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Ask(t.Context(), "cv", "q")
			var apiErr *client.APIError
			if tc.lostErr == syscall.ECONNREFUSED {
				// nothing listens, as far as the client can tell: final at once (Retry)
				if !errors.Is(err, syscall.ECONNREFUSED) {
					t.Fatalf("got %v, want the refusal", err)
				}
			} else if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("got %v, want the 503", err)
			}
			if got := errors.Is(err, client.ErrMayHaveBeenMade); got != tc.want {
				t.Errorf("errors.Is(%v, ErrMayHaveBeenMade) = %v, want %v", err, got, tc.want)
			}
			if got := strings.Contains(err.Error(), "may have been made"); got != tc.want {
				t.Errorf("%q: says it may have been made: %v, want %v", err, got, tc.want)
			}
		})
	}
}

// net/http sends a request with an Idempotency-Key again by itself when its reused connection
// fails after the request was written; the client never saw that first attempt, whose reply was
// lost. It is counted as one (ErrMayHaveBeenMade) and logged: through a real socket, a 202 lost
// that way and then a 503 read as a plain refusal, and the transport's retry was silent.
func TestCreateRetriedByTheTransportMayHaveBeenMade(t *testing.T) {
	var asks atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/ask/v1/conversations" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"cv","created_at":"2026-11-29T20:00:00Z"}`)
			return
		}
		if asks.Add(1) == 1 {
			// made, and the connection (kept alive since the conversation) fails before the reply
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"type":"about:blank","title":"Service Unavailable","status":503}`)
	}))
	t.Cleanup(hs.Close)
	var logged atomic.Int64
	c, err := client.New(hs.URL+"/ask", client.Options{Retry: quick, Logger: slog.New(messageCounter{"request retried by the transport", &logged})})
	if err != nil {
		t.Fatal(err)
	}
	cv, err := c.CreateConversation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Ask(t.Context(), cv.Id, "q")
	if n := asks.Load(); n != 2 {
		t.Fatalf("%d createAsk requests, want 2 (the transport's retry): the test proves nothing", n)
	}
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || !errors.Is(err, client.ErrMayHaveBeenMade) {
		t.Errorf("got %v, want the 503 and ErrMayHaveBeenMade", err)
	}
	if logged.Load() == 0 {
		t.Error("the transport's retry was not logged")
	}
}
