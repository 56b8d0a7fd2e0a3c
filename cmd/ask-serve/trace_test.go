package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestAskServeExportsTracesAsAskdDoes: with OTEL_EXPORTER_OTLP_ENDPOINT set, ask-serve's
// service exports its spans as askd's does, and docs/operations.md says so. The page said
// "make ask-serve exports no traces" and sent a reader to run bin/askd beside it for them.
func TestAskServeExportsTracesAsAskdDoes(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(doc), "exports no traces") || !strings.Contains(string(doc), "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 make ask-serve") {
		t.Error("docs/operations.md does not say that make ask-serve exports traces with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}

	var exported atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			exported.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	// The exporter reads its endpoint from the process's environment; config, from lookup.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	lookup := func(k string) (string, bool) {
		if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return collector.URL, true
		}
		return "", false
	}

	sigs := make(chan os.Signal, 2)
	out, w := io.Pipe()
	errc := make(chan error, 1)
	go func() {
		errc <- run(sigs, []string{"-addr", "127.0.0.1:0", "-idp-addr", "127.0.0.1:0", "-source-addr", "127.0.0.1:0",
			"-stub-addr", "127.0.0.1:0", "-state", t.TempDir()}, lookup, w, io.Discard)
		w.Close()
	}()
	askURL, idpURL := "", ""
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := regexp.MustCompile(`ask service\s+(http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			askURL = m[1]
		}
		if m := regexp.MustCompile(`identity provider\s+(http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			idpURL = m[1]
		}
		if sc.Text() == "Ctrl-C stops everything." {
			break
		}
	}
	if askURL == "" || idpURL == "" {
		t.Fatalf("ask-serve did not print its URLs (err: %v)", <-errc)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		sigs <- os.Interrupt
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("ask-serve stopped with %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("ask-serve did not stop after Ctrl-C")
		}
	}
	defer stop()

	post := func(u, bearer, ct, body string, v any) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(v)
		return resp
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	post(idpURL+"/token", "", "application/x-www-form-urlencoded", url.Values{"oid": {"alice"}}.Encode(), &tok)
	var conv struct {
		ID string `json:"id"`
	}
	post(askURL+"/v1/conversations", tok.AccessToken, "application/json", "{}", &conv)
	var ticket struct {
		EventsURL string `json:"events_url"`
	}
	if resp := post(askURL+"/v1/conversations/"+conv.ID+"/asks", tok.AccessToken, "application/json",
		`{"question":"How many sev1 incidents did we have in 2026-Q2?"}`, &ticket); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("ask: %d", resp.StatusCode)
	}
	u, _ := url.Parse(askURL)
	req, _ := http.NewRequest(http.MethodGet, u.Scheme+"://"+u.Host+ticket.EventsURL, nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	events, _ := io.ReadAll(stream.Body) // to done, which closes the stream
	stream.Body.Close()
	if !strings.Contains(string(events), "event: done") {
		t.Fatalf("the stream ended without done:\n%s", events)
	}
	stop() // the last spans are exported by then
	if exported.Load() == 0 {
		t.Error("ask-serve exported no spans to OTEL_EXPORTER_OTLP_ENDPOINT")
	}
}
