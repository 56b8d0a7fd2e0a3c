package server_test

import (
	"bufio"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/das-ask/ask/server"
)

// TestReadmeCancelShowsEveryHeader: README's curl walk shows the cancel's answer "pasted as it
// printed", headers and all; every header the service writes on it is there, and every one
// there but those net/http adds itself (Date, Content-Length) is one the service writes. The
// paste lacked X-Content-Type-Options after the service began to send it on every response.
func TestReadmeCancelShowsEveryHeader(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "\nHTTP/1.1 202 Accepted\n")
	if !ok {
		t.Fatal("README.md shows no cancel answer (HTTP/1.1 202 Accepted)")
	}
	var shown []string
	for sc := bufio.NewScanner(strings.NewReader(block)); sc.Scan() && sc.Text() != ""; {
		name, _, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			t.Fatalf("README.md's cancel answer: %q is not a header line", sc.Text())
		}
		shown = append(shown, http.CanonicalHeaderKey(name))
	}

	h := newHarness(t, server.Options{})
	ticket := h.ask(alice, h.conv(alice), "q-readme-cancel")
	r := h.cancel(alice, ticket)
	if r.StatusCode() != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", r.StatusCode(), r.Body)
	}
	for name := range r.HTTPResponse.Header {
		if !slices.Contains(shown, name) {
			t.Errorf("the cancel's answer carries %s, which README.md's paste of it does not show", name)
		}
	}
	for _, name := range shown {
		if name == "Date" || name == "Content-Length" {
			continue // net/http's server adds them; the in-memory transport does not
		}
		if _, ok := r.HTTPResponse.Header[name]; !ok {
			t.Errorf("README.md's paste of the cancel's answer shows %s, which the service does not send", name)
		}
	}
}
