package source_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask/agent/source"
)

// proxyChild marks the child process of TestPlainHTTPSourceBypassesTheEnvironmentsProxy: Go
// reads HTTP_PROXY once per process, so the proxy is set in a process of its own.
const proxyChild = "ASK_SOURCE_PROXY_CHILD"

// A forward proxy taken from the environment (HTTP_PROXY, as an operator sets for the model
// provider's egress) never receives the caller's bearer: a plain-http source's requests would
// reach it whole, Authorization included, so they are not proxied. (An https source may be:
// its requests cross the proxy inside a CONNECT tunnel, which the proxy cannot read.) The
// child makes one ordinary request through the proxy, which shows the proxy is in effect, and
// connects to a plain-http source with the default transport.
func TestPlainHTTPSourceBypassesTheEnvironmentsProxy(t *testing.T) {
	if os.Getenv(proxyChild) == "1" {
		proxyChildMain(t)
		return
	}
	var mu sync.Mutex
	var seen []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.String()+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, "proxy says no", http.StatusBadGateway)
	}))
	t.Cleanup(proxy.Close)

	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestPlainHTTPSourceBypassesTheEnvironmentsProxy$", "-test.count=1")
	cmd.Env = append(os.Environ(), proxyChild+"=1", "HTTP_PROXY="+proxy.URL, "http_proxy="+proxy.URL,
		"HTTPS_PROXY=", "https_proxy=", "NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	control := false
	for _, s := range seen {
		control = control || strings.Contains(s, "control.example")
		if strings.Contains(s, "source.example") {
			t.Errorf("the proxy received a source request: %s", s)
		}
		if strings.Contains(s, "the-callers-bearer") {
			t.Errorf("the proxy received the caller's bearer")
		}
	}
	if !control {
		t.Fatalf("the proxy saw no request at all (%q): the environment's proxy was not in effect, the check proves nothing", seen)
	}
}

func proxyChildMain(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://control.example/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	s, err := source.Connect(ctx, source.Config{Name: "demo", URL: "http://source.example/mcp"}, "the-callers-bearer", source.Options{})
	if err == nil {
		s.Close()
		t.Fatal("connected to a source that does not exist")
	}
}
