package auth_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/das-ask/ask/auth"
)

// proxyChild marks the child process of TestPlainHTTPJWKSBypassesTheEnvironmentsProxy: Go
// reads HTTP_PROXY once per process, so the proxy is set in a process of its own.
const proxyChild = "ASK_AUTH_PROXY_CHILD"

// A forward proxy taken from the environment (HTTP_PROXY, as an operator sets for the model
// provider's egress) never answers a plain-http JWKS fetch: it would read and could rewrite
// the keys, publishing one of its own and minting any identity. So a plain-http DAS_JWKS_URL
// is fetched directly, as a plain-http source is (an https one may cross the proxy inside a
// CONNECT tunnel, which the proxy cannot read). The child makes one ordinary request through
// the proxy, which shows the proxy is in effect, then builds a validator for a plain-http JWKS.
func TestPlainHTTPJWKSBypassesTheEnvironmentsProxy(t *testing.T) {
	if os.Getenv(proxyChild) == "1" {
		proxyChildMain(t)
		return
	}
	var mu sync.Mutex
	var seen []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.String())
		mu.Unlock()
		http.Error(w, "proxy says no", http.StatusBadGateway)
	}))
	t.Cleanup(proxy.Close)

	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestPlainHTTPJWKSBypassesTheEnvironmentsProxy$", "-test.count=1")
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
		if strings.Contains(s, "idp.example") {
			t.Errorf("the proxy received the JWKS fetch: %s", s)
		}
	}
	if !control {
		t.Fatalf("the proxy saw no request at all (%q): the environment's proxy was not in effect, the check proves nothing", seen)
	}
}

func proxyChildMain(t *testing.T) {
	if resp, err := http.Get("http://control.example/"); err == nil {
		resp.Body.Close()
	}
	v, err := auth.New(t.Context(), auth.Config{JWKSURL: "http://idp.example/.well-known/jwks.json", Issuer: "http://idp.example", Audience: "das"}, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Ready() {
		t.Fatal("keys loaded from an identity provider that does not exist")
	}
}
