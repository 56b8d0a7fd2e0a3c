package nginx_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/deploy/nginx/nginxtest"
)

// TestGatewayLetsSlowClientsGo: a client that stops sending its request, in the header or in
// the body, is let go after 10 s, as askd lets it go (its ReadHeaderTimeout; the body's own
// bound is 60 s in all there, 10 s between reads here), not after nginx's default 60 s. The
// test waits on nginx's real timers: they are what is checked.
func TestGatewayLetsSlowClientsGo(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(upstream.Close)
	addr := nginxtest.Start(t, strings.TrimPrefix(upstream.URL, "http://"))
	for _, c := range []struct{ name, sent string }{
		{"header", "GET /ask/v1/asks/t_1 HTTP/1.1\r\nHost: ask.test\r\n"},
		{"body", "POST /ask/v1/conversations HTTP/1.1\r\nHost: ask.test\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\":"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			start := time.Now()
			if _, err := io.WriteString(conn, c.sent); err != nil {
				t.Fatal(err)
			}
			// nginx's default would hold the connection 60 s: give up at 30.
			_ = conn.SetReadDeadline(start.Add(30 * time.Second))
			got, err := io.ReadAll(conn)
			took := time.Since(start)
			if err != nil {
				t.Fatalf("the connection was still open after %s (%q read): %v", took.Round(time.Second), got, err)
			}
			if took < 9*time.Second {
				t.Errorf("let go after %s, before its 10 s: %q", took, got)
			}
			t.Logf("let go after %s: %q", took.Round(100*time.Millisecond), got)
		})
	}
}
