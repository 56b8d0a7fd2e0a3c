package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	askconfig "github.com/das-ask/ask/config"
)

// A URL where another server answers with a page and 200 OK (a sign-in portal, a web server) is
// said to be that, once: ask said "the service refused the request: 200 OK".
func TestRunAtAURLThatIsNotTheService(t *testing.T) {
	var hits atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<html><body>Please sign in</body></html>")
	}))
	t.Cleanup(hs.Close)
	env := askconfig.MapEnv(map[string]string{"ASK_URL": hs.URL + "/ask", "ASK_TOKEN": "tok", "XDG_STATE_HOME": t.TempDir()})
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"How many sev1 incidents?"}, strings.NewReader(""), &stdout, &stderr, env)
	want := "ask: what answered at " + hs.URL + `/ask is not the ask service: a 200 OK with Content-Type "text/html; charset=utf-8", not its JSON`
	if code != exitFailure || !strings.HasPrefix(stderr.String(), want) || strings.Contains(stderr.String(), "refused") {
		t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr.String(), want)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}
