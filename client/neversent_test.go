package client_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask/client"
)

// A create whose request never left the client cannot have been made, and its error does not
// match ErrMayHaveBeenMade: a ctx that had ended before the call (nothing is sent), and a
// service that cannot be connected to at all (SYNs dropped: every attempt waits out the header
// timeout in the dial). Both said "an earlier attempt's reply was lost: it may have been made",
// so a caller (the CLI) went looking for an ask that no attempt could have made.
func TestCreateNeverSentIsNotMayHaveBeenMade(t *testing.T) {
	creates := []struct {
		name string
		do   func(ctx context.Context, c *client.Client) error
	}{
		{"createConversation", func(ctx context.Context, c *client.Client) error { _, err := c.CreateConversation(ctx); return err }},
		{"createAsk", func(ctx context.Context, c *client.Client) error { _, err := c.Ask(ctx, "cv", "q"); return err }},
	}
	t.Run("ctx ended before the call", func(t *testing.T) {
		var requests atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1) })
		c := memClient(t, h, client.Options{Retry: quick})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		for _, call := range creates {
			err := call.do(ctx, c)
			if !errors.Is(err, context.Canceled) || requests.Load() != 0 {
				t.Fatalf("%s: got %v after %d requests, want ctx's error and none", call.name, err, requests.Load())
			}
			if errors.Is(err, client.ErrMayHaveBeenMade) {
				t.Errorf("%s: %v matches ErrMayHaveBeenMade: nothing was sent", call.name, err)
			}
		}
	})
	t.Run("no connection within the header timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var dials atomic.Int64
			tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				dials.Add(1)
				<-ctx.Done() // the connection is never made
				return nil, ctx.Err()
			}}
			defer tr.CloseIdleConnections()
			c, err := client.New("http://ask.test/ask", client.Options{
				HTTPClient:    &http.Client{Transport: tr},
				Retry:         client.Retry{Initial: time.Millisecond, Max: 5 * time.Millisecond, Attempts: 2},
				HeaderTimeout: 3 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, call := range creates {
				dials.Store(0)
				err := call.do(t.Context(), c)
				if err == nil || dials.Load() != 2 {
					t.Fatalf("%s: got %v after %d dials, want an error after 2", call.name, err, dials.Load())
				}
				if errors.Is(err, client.ErrMayHaveBeenMade) {
					t.Errorf("%s: %v matches ErrMayHaveBeenMade: no connection was made", call.name, err)
				}
			}
		})
	})
	t.Run("control: a request sent, no headers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// through a real transport, so that its trace is what tells: the service reads the
			// request and freezes, so it may have made it
			var reads atomic.Int64
			tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				cli, srv := net.Pipe()
				go func() {
					defer srv.Close()
					if req, err := http.ReadRequest(bufio.NewReader(srv)); err == nil {
						_, _ = io.Copy(io.Discard, req.Body)
						reads.Add(1)
					}
					_, _ = io.Copy(io.Discard, srv) // frozen until the client goes
				}()
				return cli, nil
			}}
			defer tr.CloseIdleConnections()
			c, err := client.New("http://ask.test/ask", client.Options{
				HTTPClient:    &http.Client{Transport: tr},
				Retry:         client.Retry{Initial: time.Millisecond, Max: 5 * time.Millisecond, Attempts: 2},
				HeaderTimeout: 3 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, call := range creates {
				reads.Store(0)
				if err := call.do(t.Context(), c); !errors.Is(err, client.ErrMayHaveBeenMade) || reads.Load() != 2 {
					t.Errorf("%s: %v does not match ErrMayHaveBeenMade: %d requests read, want 2, each sent and its reply never come", call.name, err, reads.Load())
				}
			}
		})
	})
}
