package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/das-ask/ask/internal/memnet"
	"github.com/das-ask/ask/server"
)

// Every address the service hands out — Location and the body's *_url fields — is usable as it
// is: resolved against the URL the request went to, it reaches the call it names, whatever the
// base path (a gateway mounts the service at that same path, so the same holds behind it).
func TestHandedOutURLsResolve(t *testing.T) {
	for _, basePath := range []string{"/ask", "/", "/team/ask"} {
		t.Run(basePath, func(t *testing.T) {
			h := newHarness(t, server.Options{BasePath: basePath})
			hc := &http.Client{Transport: memnet.Transport{Handler: h.srv.Handler()}}
			root := "http://ask.test" + strings.TrimSuffix(basePath, "/")
			do := func(method, target string, at *url.URL) (*http.Response, []byte, *url.URL) {
				t.Helper()
				u, err := at.Parse(target)
				if err != nil {
					t.Fatalf("%q does not resolve against %s: %v", target, at, err)
				}
				req, _ := http.NewRequest(method, u.String(), nil)
				if method == http.MethodPost {
					body := "{}"
					if strings.HasSuffix(u.Path, "/asks") {
						body = `{"question":"how many?"}`
					}
					req.Body = io.NopCloser(strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
				}
				req.Header.Set("Authorization", "Bearer "+alice)
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				return resp, b, u
			}
			start, _ := url.Parse(root + "/v1/conversations")
			resp, body, at := do(http.MethodPost, start.String(), start)
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("create conversation: %d %s", resp.StatusCode, body)
			}
			var conv struct {
				AsksURL string `json:"asks_url"`
			}
			_ = json.Unmarshal(body, &conv)
			if loc := resp.Header.Get("Location"); loc != conv.AsksURL {
				t.Errorf("Location %q, asks_url %q: want the same address", loc, conv.AsksURL)
			}
			resp, body, at = do(http.MethodPost, conv.AsksURL, at)
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("POST asks_url %s: %d %s", at, resp.StatusCode, body)
			}
			var tk struct {
				EventsURL string `json:"events_url"`
				StatusURL string `json:"status_url"`
				CancelURL string `json:"cancel_url"`
			}
			_ = json.Unmarshal(body, &tk)
			if loc := resp.Header.Get("Location"); loc != tk.StatusURL {
				t.Errorf("Location %q, status_url %q: want the same address", loc, tk.StatusURL)
			}
			askedAt := at
			if resp, body, u := do(http.MethodGet, tk.EventsURL, askedAt); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "event: done") {
				t.Errorf("GET events_url %s: %d %.200s", u, resp.StatusCode, body)
			}
			if resp, body, u := do(http.MethodGet, tk.StatusURL, askedAt); resp.StatusCode != http.StatusOK {
				t.Errorf("GET status_url %s: %d %s", u, resp.StatusCode, body)
			}
			if resp, body, u := do(http.MethodPost, tk.CancelURL, askedAt); resp.StatusCode != http.StatusAccepted {
				t.Errorf("POST cancel_url %s: %d %s", u, resp.StatusCode, body)
			}
		})
	}
}
