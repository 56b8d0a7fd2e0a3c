package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/das-ask/ask/client"
)

// A TokenSource that fetches its token over HTTP with the call's context (an OAuth refresh, the
// dev identity provider) writes a request of its own before the create's. The create's trace
// counted that write as the create's first and took the create for one net/http had sent twice:
// a create refused once, with no reply lost, matched ErrMayHaveBeenMade and said "it may have
// been made", and "request retried by the transport" was logged for a retry that never was. A
// redirect followed within the service's origin (a 307 resends the request) is no lost reply
// either: the first write had its response.
func TestTokenFetchedOverHTTPIsNoLostReply(t *testing.T) {
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "tok")
	}))
	t.Cleanup(idp.Close)
	var creates atomic.Int32
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Query().Get("moved") == "" {
			http.Redirect(w, r, r.URL.Path+"?moved=1", http.StatusTemporaryRedirect)
			return
		}
		creates.Add(1)
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"type":"about:blank","title":"Bad Request","status":400}`)
	}))
	t.Cleanup(svc.Close)
	tokens := client.TokenFunc(func(ctx context.Context) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, idp.URL+"/token", nil)
		if err != nil {
			return "", err
		}
		resp, err := idp.Client().Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	})
	var logged atomic.Int64
	c, err := client.New(svc.URL+"/ask", client.Options{Token: tokens, Retry: quick, Logger: slog.New(messageCounter{"request retried by the transport", &logged})})
	if err != nil {
		t.Fatal(err)
	}
	for _, call := range []struct {
		name string
		do   func() error
	}{
		{"createConversation", func() error { _, err := c.CreateConversation(t.Context()); return err }},
		{"createAsk", func() error { _, err := c.Ask(t.Context(), "cv", "q"); return err }},
	} {
		creates.Store(0)
		err := call.do()
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || creates.Load() != 1 {
			t.Fatalf("%s: got %v after %d requests, want the 400 after one", call.name, err, creates.Load())
		}
		if errors.Is(err, client.ErrMayHaveBeenMade) {
			t.Errorf("%s: %v matches ErrMayHaveBeenMade: no reply was lost", call.name, err)
		}
	}
	if n := logged.Load(); n != 0 {
		t.Errorf("%d transport retries logged, want none", n)
	}
}
