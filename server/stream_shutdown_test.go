package server_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/server"
)

// TestShutdownLetsGoOfAStreamNotRead: a stream whose client does not read, its write waiting
// on the client's full buffers, is closed by Shutdown, as every open stream is, and does not
// hold the HTTP server's own shutdown for the stream's write timeout. Before, with nothing
// running, such a client held askd's stop until its bound (the grace and 10 s), and askd then
// exited 1, "connections still open"; here the write timeout is an hour.
func TestShutdownLetsGoOfAStreamNotRead(t *testing.T) {
	big := strings.Repeat("x", 16<<20) // past what the connection's buffers take
	runner := ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome {
		return ask.Outcome{Answer: answer(big)}
	})
	srv, err := server.New(server.Options{Authenticator: fakeAuth{}, Runner: runner, StreamWriteTimeout: time.Hour, ShutdownGrace: -1})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	cw, err := gen.NewClientWithResponses(hs.URL + "/ask")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv, cw: cw}
	ticket := h.ask(alice, h.conv(alice), "q")

	conn, err := net.DialTimeout("tcp", hs.Listener.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(conn, "GET /ask/v1/asks/%s/events HTTP/1.1\r\nHost: ask.test\r\nAuthorization: Bearer %s\r\n\r\n", ticket, alice)
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the stream: %v %v", resp, err)
	}
	// From here on the client reads nothing.

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	hctx, hcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer hcancel()
	if err := hs.Config.Shutdown(hctx); err != nil {
		t.Fatalf("the HTTP server's shutdown waited for a stream whose client does not read (write timeout 1 h): %v", err)
	}
}

// TestDrainingClosesEachConnectionAfterItsAnswer: once a server drains, each response says
// Connection: close and net/http closes its connection after it, so that a gateway keeps no
// idle connection to a replica that is stopping. Each idle one the replica closed when its
// drain ended was a race with a gateway sending a request on it at that instant, which nginx
// answers 502 for a POST and does not send again (docs/scale-out.md, "Stopping a replica
// gracefully"). Before the drain, one connection serves every request; in it, each request
// after a response takes a new one, and a refused create says Connection: close too.
func TestDrainingClosesEachConnectionAfterItsAnswer(t *testing.T) {
	release := make(chan struct{})
	runner := ask.RunnerFunc(func(ctx context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return ask.Outcome{Answer: answer("ok")}
	})
	logs := &logtest.Buffer{}
	srv, err := server.New(server.Options{Authenticator: fakeAuth{}, Runner: runner, ShutdownGrace: time.Minute,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int64
	hs := httptest.NewUnstartedServer(srv.Handler())
	hs.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cw, err := gen.NewClientWithResponses(hs.URL+"/ask", gen.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, srv: srv, cw: cw}
	cid := h.conv(alice)
	ticket := h.ask(alice, cid, "q")
	for range 2 {
		if r := h.status(alice, ticket); r.StatusCode() != http.StatusOK || r.HTTPResponse.Close {
			t.Fatalf("a status read before the drain: %d, Connection %q", r.StatusCode(), r.HTTPResponse.Header.Get("Connection"))
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections before the drain, want one kept alive", n)
	}

	shutdown := make(chan error, 1)
	go func() { shutdown <- srv.Shutdown(context.Background()) }()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := logs.WaitFor(ctx, `"shutting down"`); err != nil {
		t.Fatal(err)
	}
	// (net/http's client takes Connection: close out of the header into Response.Close.)
	for i := range 2 {
		r := h.status(alice, ticket)
		if r.StatusCode() != http.StatusOK || !r.HTTPResponse.Close {
			t.Errorf("a status read while draining: %d, closing %v, want 200 and Connection: close", r.StatusCode(), r.HTTPResponse.Close)
		}
		// The first went on the connection kept alive before the drain; each after it, on a
		// new one.
		if n := conns.Load(); n != int64(1+i) {
			t.Errorf("read %d while draining: %d connections in all, want %d", i+1, n, 1+i)
		}
	}
	if r := h.askRaw(alice, cid, "q"); r.StatusCode() != http.StatusServiceUnavailable || !r.HTTPResponse.Close {
		t.Errorf("a create while draining: %d, closing %v, want 503 and Connection: close", r.StatusCode(), r.HTTPResponse.Close)
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections in all, want 3: each answer in the drain closed its own", n)
	}
	close(release)
	if err := <-shutdown; err != nil {
		t.Fatal(err)
	}
}
