package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
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
