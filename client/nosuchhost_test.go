package client_test

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask/client"
)

// A host name that does not resolve, before the service has ever answered the client, is final
// at once, as a connection refused is (docs/clients.md, and the TypeScript and Python clients):
// a wrong URL is not a blip worth eight retries. It was retried, about 7 s for a call and a
// minute for a stream at the defaults, each retry logged. A lookup that failed for a while (the
// resolver did not answer) is still retried.
func TestNoSuchHostBeforeAnyResponseIsFinal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dns   *net.DNSError
		final bool
	}{
		{"no such host", &net.DNSError{Err: "no such host", Name: "ask.test", IsNotFound: true}, true},
		{"the resolver did not answer", &net.DNSError{Err: "server misbehaving", Name: "ask.test", IsTemporary: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dials atomic.Int64
			tr := roundTrip(func(*http.Request) (*http.Response, error) {
				dials.Add(1)
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: tc.dns}
			})
			var retries, reconnects atomic.Int64
			newClient := func(log *slog.Logger) *client.Client {
				c, err := client.New("http://ask.test/ask", client.Options{
					HTTPClient: &http.Client{Transport: tr},
					Retry:      quick,
					Reconnect:  client.Reconnect{Initial: time.Millisecond, Max: time.Millisecond},
					Logger:     log,
				})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			c := newClient(countingLogger(&retries))
			_, err := c.CreateConversation(t.Context())
			var dnsErr *net.DNSError
			if !errors.As(err, &dnsErr) {
				t.Fatalf("createConversation: got %v, want the lookup's error", err)
			}
			if got := retries.Load() == 0 && dials.Load() == 1; got != tc.final {
				t.Errorf("createConversation: %d dials, %d retries logged; final at once: %v, want %v", dials.Load(), retries.Load(), got, tc.final)
			}
			dials.Store(0)
			var streamErr error
			cs := newClient(slog.New(messageCounter{"event stream reconnecting", &reconnects}))
			for _, err := range cs.Events(t.Context(), "t_x", client.EventsOptions{}) {
				if err != nil {
					streamErr = err
				}
			}
			if !errors.As(streamErr, &dnsErr) {
				t.Fatalf("events: got %v, want the lookup's error", streamErr)
			}
			if got := reconnects.Load() == 0 && dials.Load() == 1; got != tc.final {
				t.Errorf("events: %d dials, %d reconnects logged; final at once: %v, want %v", dials.Load(), reconnects.Load(), got, tc.final)
			}
		})
	}
}
