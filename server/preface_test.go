package server_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/das-ask/ask/server"
)

// TestHTTP2PrefaceIs505: the connection preface of HTTP/2 with prior knowledge (h2c, as
// `curl --http2-prior-knowledge` opens), sent to the service's HTTP/1.x listener, is a 505 in
// text/plain without a request id (even with obs in front, which sets one on every response),
// the connection closed: as net/http answers every other request line of a version other than
// 1.x, and as the contract's description says. net/http hands that one request line to the
// handler, and the service answered it with a 404 problem+json.
func TestHTTP2PrefaceIs505(t *testing.T) {
	srv, err := server.New(server.Options{Authenticator: fakeAuth{}, Runner: answerRunner(1), ShutdownGrace: -1})
	if err != nil {
		t.Fatal(err)
	}
	// In front of the service, as obs is in askd: a request id set on every response first.
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "set-in-front")
		srv.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		hs.Close()
	})
	conn, err := net.DialTimeout("tcp", hs.Listener.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response to the HTTP/2 preface: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusHTTPVersionNotSupported || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" ||
		resp.Header.Get("X-Request-Id") != "" {
		t.Errorf("the HTTP/2 preface: %d %q X-Request-Id %q: %s; want 505 text/plain without a request id",
			resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("X-Request-Id"), body)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("the connection is kept after the 505: %v", err)
	}
}
