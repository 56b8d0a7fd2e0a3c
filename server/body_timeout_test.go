package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/server"
)

// A request that declares a body and sends less of it is answered once BodyReadTimeout has
// passed, and its connection let go: 401 without a bearer (the body is never read, and
// net/http's drain after the response meets the deadline), 408 with one (the service's read
// meets it; a 400 until 2026-12-07, where RFC 9110 §15.5.9 has 408 for it). Before, both waited for the rest of the body for good, holding a connection and
// a handler each, the unauthenticated one without ever answering. A body sent whole within
// the timeout, on a connection kept alive, is read as usual, and so is the next request on it
// however long after.
func TestBodyReadTimeout(t *testing.T) {
	// The run takes three times the timeout, so a deadline left from the POSTs before its
	// stream, on the same connection, would cut the stream.
	slow := ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
		}
		return ask.Outcome{Answer: answer("42")}
	})
	srv, err := server.New(server.Options{Authenticator: fakeAuth{}, Runner: slow, BodyReadTimeout: 100 * time.Millisecond, ShutdownGrace: -1})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		hs.Close()
	})
	dial := func(t *testing.T) (net.Conn, *bufio.Reader) {
		t.Helper()
		conn, err := net.DialTimeout("tcp", hs.Listener.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		// The test's own bound: well past the service's 100 ms, well short of for good.
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		return conn, bufio.NewReader(conn)
	}
	for _, tt := range []struct {
		name, auth string
		want       int
	}{
		{"no bearer", "", http.StatusUnauthorized},
		{"a bearer", "Authorization: Bearer " + alice + "\r\n", http.StatusRequestTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, br := dial(t)
			fmt.Fprintf(conn, "POST /ask/v1/conversations HTTP/1.1\r\nHost: ask.test\r\n%sContent-Type: application/json\r\nContent-Length: 5\r\n\r\n{}", tt.auth)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no response to a body that stopped short (BodyReadTimeout 100 ms): %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("status %d %s, want %d problem+json: %s", resp.StatusCode, resp.Header.Get("Content-Type"), tt.want, body)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				t.Errorf("the connection of a body that stopped short is kept: %v", err)
			}
		})
	}

	t.Run("a whole body, then a slow request on the same connection", func(t *testing.T) {
		conn, br := dial(t)
		fmt.Fprintf(conn, "POST /ask/v1/conversations HTTP/1.1\r\nHost: ask.test\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", alice)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("create: %d %s", resp.StatusCode, body)
		}
		id := strings.Split(resp.Header.Get("Location"), "/")[4]
		fmt.Fprintf(conn, "POST /ask/v1/conversations/%s/asks HTTP/1.1\r\nHost: ask.test\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{\"question\":\"q\"}", id, alice)
		if resp, err = http.ReadResponse(br, nil); err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("ask: %d %s", resp.StatusCode, body)
		}
		// Read the ticket's stream to its end on the same connection: no deadline of the
		// POSTs before may cut it.
		ticket := strings.Split(resp.Header.Get("Location"), "/")[4]
		fmt.Fprintf(conn, "GET /ask/v1/asks/%s/events HTTP/1.1\r\nHost: ask.test\r\nAuthorization: Bearer %s\r\n\r\n", ticket, alice)
		if resp, err = http.ReadResponse(br, nil); err != nil {
			t.Fatal(err)
		}
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !strings.Contains(string(body), "event: done") {
			t.Fatalf("the stream after two POSTs: %v %q", err, body)
		}
	})
}
