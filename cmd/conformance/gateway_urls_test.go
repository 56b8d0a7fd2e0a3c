package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/stack"
)

// The addresses the service hands out (Location, asks_url, events_url, status_url, cancel_url)
// are usable as they are behind the reference gateway: resolved against the gateway's URL the
// request went to, each reaches its call through nginx.
func TestHandedOutURLsResolveThroughTheGateway(t *testing.T) {
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx is not installed (apt-get install -y nginx-light); make conformance-gateway installs it")
	}
	s, err := stack.Start(t.Context(), stack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	g, err := startGateway(t.Context(), gatewayOptions{nginx: "nginx", template: "../../deploy/nginx/ask.conf",
		readTimeout: 10 * time.Second, upstreams: []string{s.AskURL}, logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.stop(); err != nil {
			t.Error(err)
		}
	})
	tok, err := s.IdP.Mint(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	call := func(method string, at *url.URL, ref, body string) (*http.Response, map[string]any, *url.URL) {
		t.Helper()
		u, err := at.Parse(ref)
		if err != nil {
			t.Fatalf("%q does not resolve against %s: %v", ref, at, err)
		}
		req, _ := http.NewRequestWithContext(t.Context(), method, u.String(), strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		if m == nil {
			m = map[string]any{"raw": string(b)}
		}
		return resp, m, u
	}
	str := func(m map[string]any, k string) string { v, _ := m[k].(string); return v }

	start, _ := url.Parse(g.urls[0] + "/v1/conversations")
	resp, conv, at := call(http.MethodPost, start, start.String(), "{}")
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Location") != str(conv, "asks_url") {
		t.Fatalf("conversation through the gateway: %d, Location %q, body %v", resp.StatusCode, resp.Header.Get("Location"), conv)
	}
	resp, tk, at := call(http.MethodPost, at, str(conv, "asks_url"), `{"question":"How many sev1 incidents did we have in 2026-Q2?"}`)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Location") != str(tk, "status_url") {
		t.Fatalf("POST asks_url through the gateway (%s): %d, Location %q, body %v", at, resp.StatusCode, resp.Header.Get("Location"), tk)
	}
	if resp, m, u := call(http.MethodGet, at, str(tk, "events_url"), ""); resp.StatusCode != http.StatusOK || !strings.Contains(str(m, "raw"), "event: done") {
		t.Errorf("GET events_url %s: %d %.200v", u, resp.StatusCode, m)
	}
	if resp, m, u := call(http.MethodGet, at, str(tk, "status_url"), ""); resp.StatusCode != http.StatusOK || str(m, "state") != "answer" {
		t.Errorf("GET status_url %s: %d %v", u, resp.StatusCode, m)
	}
	if resp, m, u := call(http.MethodPost, at, str(tk, "cancel_url"), ""); resp.StatusCode != http.StatusAccepted {
		t.Errorf("POST cancel_url %s: %d %v", u, resp.StatusCode, m)
	}
}
