package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/das-ask/ask/internal/memnet"
	"github.com/das-ask/ask/openapi"
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

// The contract a service publishes names its own mount as its server, so that a client or tool
// generated from it (the document's paths are relative to the server) calls the paths the
// service answers: resolved against the document's own URL, servers[0] + /v1/openapi.yaml is
// the document again. At the default mount it is the embedded document byte for byte.
func TestPublishedContractNamesItsMount(t *testing.T) {
	for _, basePath := range []string{"/ask", "/", "/team/ask", "/a+b"} {
		t.Run(basePath, func(t *testing.T) {
			h := newHarness(t, server.Options{BasePath: basePath})
			hc := &http.Client{Transport: memnet.Transport{Handler: h.srv.Handler()}}
			for _, name := range []string{"openapi.yaml", "openapi.json"} {
				at, _ := url.Parse("http://ask.test" + strings.TrimSuffix(basePath, "/") + "/v1/" + name)
				resp, err := hc.Get(at.String())
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %d", at, resp.StatusCode)
				}
				doc, err := openapi3.NewLoader().LoadFromData(body)
				if err != nil {
					t.Fatalf("%s: %v", at, err)
				}
				if len(doc.Servers) != 1 {
					t.Fatalf("%s: servers %v, want one", at, doc.Servers)
				}
				server, err := at.Parse(doc.Servers[0].URL)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := strings.TrimSuffix(server.Path, "/")+"/v1/"+name, at.Path; got != want {
					t.Errorf("%s: servers[0] %q reaches %s, want %s", at, doc.Servers[0].URL, got, want)
				}
				if basePath == "/ask" && name == "openapi.yaml" && !bytes.Equal(body, openapi.YAML) {
					t.Errorf("at the default mount, openapi.yaml is not the embedded document byte for byte")
				}
			}
		})
	}
}
