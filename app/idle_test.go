package app_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/config"
)

// TestIdleConnectionIsClosed: a kept-alive connection that sends no next request is closed
// once Main.IdleTimeout has passed. askd's http.Server had no IdleTimeout (nor ReadTimeout,
// which would end event streams), so after one request, a GET of the contract needing no
// bearer, a client held its connection and a goroutine for good: found probing the dev stack,
// still open 30 s on.
func TestIdleConnectionIsClosed(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Ops.AdminAddr = "127.0.0.1:0"
	m := app.NewMain(cfg)
	m.IdleTimeout = 100 * time.Millisecond
	m.Authenticator = noAuth{}
	m.Runner = ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome { return ask.Outcome{} })
	if err := m.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	u, err := url.Parse(m.URL())
	if err != nil {
		t.Fatal(err)
	}
	// The API's listener, and the admin listener's (the same hold, by whoever reaches it).
	for _, c := range []struct{ addr, path string }{{m.Addr(), u.Path + "/v1/openapi.yaml"}, {m.AdminAddr(), "/healthz"}} {
		conn, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		if _, err := io.WriteString(conn, "GET "+c.path+" HTTP/1.1\r\nHost: ask.test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("%s: %d, %v, close %v", c.path, resp.StatusCode, err, resp.Close)
		}
		resp.Body.Close()
		// The test's own bound: well past the service's 100 ms, well short of for good.
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("%s: an idle kept-alive connection, 10 s on (IdleTimeout 100 ms): %v, want it closed (EOF)", c.path, err)
		}
	}
}
