package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// A stream whose client has stopped reading ends once a write has waited StreamWriteTimeout:
// its handler, buffer and connection are let go. Before, the write waited for the client for
// good. A kept-alive connection's later request is not cut by the deadline the stream set
// (net/http clears it after each response; this holds it to that).
func TestStreamLetsGoOfAClientThatStoppedReading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := strings.Repeat("x", 4096)
		h := newHarness(t, server.Options{
			StreamWriteTimeout: 200 * time.Millisecond,
			Runner: ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
				if req.Question == "How slow is the slow one?" {
					<-ctx.Done()
					return ask.Outcome{}
				}
				for i := range 100 { // 400 KB of steps
					emit.Step(gen.StepBody{CallId: fmt.Sprint("c", i), Tool: "run_query", Source: "demo", Args: map[string]any{"sql": big}, Ms: 1})
				}
				return ask.Outcome{Answer: &gen.AnswerBody{Text: "done", Path: gen.AnswerPath{Speed: gen.AnswerPathSpeedFull, Detail: "warehouse"}}}
			}),
		})
		tk := h.ask(alice, h.conv(alice), "How much does a stalled client hold?")
		synctest.Wait() // the run ends

		ended := make(chan struct{}, 1)
		ln := servePipe(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.srv.Handler().ServeHTTP(w, r)
			if strings.HasSuffix(r.URL.Path, "/events") {
				ended <- struct{}{}
			}
		}))
		openStream(t, ln, tk, "")
		// Read nothing: the stream's first write waits (a pipe holds nothing) past its deadline.
		select {
		case <-ended:
		case <-time.After(20 * time.Second): // the bubble's clock
			t.Fatal("the stream of a client that stopped reading was still writing 20 s on (StreamWriteTimeout 200 ms)")
		}

		// A stream that was read to its end leaves its connection usable for a request taking
		// longer than the stream's write timeout.
		conn2 := openStream(t, ln, tk, "")
		br := bufio.NewReader(conn2)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body := new(strings.Builder)
		if _, err := bufio.NewReader(resp.Body).WriteTo(body); err != nil || !strings.Contains(body.String(), "event: done") {
			t.Fatalf("the stream read whole: %v, ends %q", err, body.String()[max(0, body.Len()-200):])
		}
		resp.Body.Close()
		<-ended
		// Then, on the same connection, a status long-poll of a running ask, whose answer is
		// written a second after the stream's last write: past the deadline the stream set.
		slow := h.ask(alice, h.conv(alice), "How slow is the slow one?")
		go fmt.Fprintf(conn2, "GET /ask/v1/asks/%s HTTP/1.1\r\nHost: ask.test\r\nAuthorization: Bearer %s\r\nPrefer: wait=1\r\n\r\n", slow, alice)
		resp, err = http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("a request on the stream's kept-alive connection: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a request on the stream's kept-alive connection: %d", resp.StatusCode)
		}
		h.cancel(alice, slow)
	})
}

// A client that reads slowly but never stops keeps its stream, however large an event: the
// write timeout bounds each few kilobytes the client takes, not a whole write. Before, the
// deadline covered the write of a whole batch or event, so a reader taking 4 KiB every 5 ms
// (800 KB/s) was let go mid-way through a 1 MB answer, and, resuming before that answer, was
// let go again at the same place on every reconnect: it could never read the answer.
func TestStreamKeepsAClientThatReadsSlowly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := strings.Repeat("x", 1<<20)
		h := newHarness(t, server.Options{
			StreamWriteTimeout: 500 * time.Millisecond,
			Runner: ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
				return ask.Outcome{Answer: &gen.AnswerBody{Text: big, Path: gen.AnswerPath{Speed: gen.AnswerPathSpeedFull, Detail: "warehouse"}}}
			}),
		})
		tk := h.ask(alice, h.conv(alice), "How slowly may a client read?")
		synctest.Wait() // the run ends

		// The stream is served over a pipe, which holds nothing: each of the server's writes
		// waits for the client to read it, and its deadline runs on the bubble's clock.
		conn := openStream(t, servePipe(t, h.srv.Handler()), tk, "Connection: close\r\n")
		resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				break
			}
			time.Sleep(5 * time.Millisecond) // the client's pace, on the bubble's clock: slow, never stopped
		}
		if !strings.HasSuffix(got.String(), "\n\n") || !strings.Contains(got.String(), "\nevent: done\n") {
			t.Fatalf("a client reading 4 KiB every 5 ms was let go after %d bytes of a 1 MB answer, without done", got.Len())
		}
	})
}

// servePipe serves handler on a pipeListener until the test ends.
func servePipe(t *testing.T, handler http.Handler) *pipeListener {
	ln := newPipeListener()
	hs := &http.Server{Handler: handler}
	served := make(chan struct{})
	go func() { defer close(served); _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close(); <-served })
	return ln
}

// openStream connects to ln and asks, as alice, for the ticket's events, with more header
// lines (each ending in CRLF); the connection is closed when the test ends.
func openStream(t *testing.T, ln *pipeListener, ticket, more string) net.Conn {
	conn, err := ln.dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// A pipe holds nothing: the request is written as the server reads it.
	go fmt.Fprintf(conn, "GET /ask/v1/asks/%s/events HTTP/1.1\r\nHost: ask.test\r\nAuthorization: Bearer %s\r\n%s\r\n", ticket, alice, more)
	return conn
}

// pipeListener is a net.Listener whose connections are net.Pipe's: nothing is buffered, a
// write blocks (durably, in a synctest bubble) until the other end reads, and deadlines run on
// the clock of the goroutine that sets them.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error { l.once.Do(func() { close(l.closed) }); return nil }

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial connects to the listener, returning the client's end.
func (l *pipeListener) dial() (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
