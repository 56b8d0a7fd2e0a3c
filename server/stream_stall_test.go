package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// stallListener gives every accepted connection a small send buffer, so that a client that
// stops reading fills it after a few kilobytes.
type stallListener struct{ net.Listener }

func (l stallListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// A stream whose client has stopped reading ends once a write has waited StreamWriteTimeout:
// its handler, buffer and connection are let go. Before, the write waited for the client for
// good. A kept-alive connection's later request is not cut by the deadline the stream set
// (net/http clears it after each response; this holds it to that).
func TestStreamLetsGoOfAClientThatStoppedReading(t *testing.T) {
	big := strings.Repeat("x", 4096)
	srv, err := server.New(server.Options{
		Authenticator:      fakeAuth{},
		StreamWriteTimeout: 200 * time.Millisecond,
		ShutdownGrace:      -1,
		Runner: ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
			if req.Question == "slow" {
				<-ctx.Done()
				return ask.Outcome{}
			}
			for i := range 100 { // 400 KB of steps: far more than the connection's buffers hold
				emit.Step(gen.StepBody{CallId: fmt.Sprint("c", i), Tool: "run_query", Source: "demo", Args: map[string]any{"sql": big}, Ms: 1})
			}
			return ask.Outcome{Answer: &gen.AnswerBody{Text: "done", Path: gen.AnswerPath{Speed: gen.AnswerPathSpeedFull, Detail: "warehouse"}}}
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{}, 1)
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.Handler().ServeHTTP(w, r)
		if strings.HasSuffix(r.URL.Path, "/events") {
			ended <- struct{}{}
		}
	}))
	startStalling(t, srv, hs)
	c, tk := finishedAsk(t, hs)

	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /ask/v1/asks/%s/events HTTP/1.1\r\nHost: ask.test\r\nAuthorization: Bearer %s\r\n\r\n", tk, alice)
	// Read nothing: the stream's writes fill the buffers and wait.
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the stream of a client that stopped reading was still writing 20 s on (StreamWriteTimeout 200 ms)")
	}

	// A stream that was read to its end leaves its connection usable for a request taking
	// longer than the stream's write timeout.
	conn2, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	br := bufio.NewReader(conn2)
	fmt.Fprintf(conn2, "GET /ask/v1/asks/%s/events HTTP/1.1\r\nHost: ask.test\r\nAuthorization: Bearer %s\r\n\r\n", tk, alice)
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
	cv2, err := c.CreateConversationWithResponse(t.Context(), nil, gen.CreateConversationRequest{}, bearer(alice))
	if err != nil || cv2.JSON201 == nil {
		t.Fatalf("create conversation: %v %v", err, cv2)
	}
	slow, err := c.CreateAskWithResponse(t.Context(), cv2.JSON201.Id, nil, gen.AskRequest{Question: "slow"}, bearer(alice))
	if err != nil || slow.JSON202 == nil {
		t.Fatalf("create ask: %v %v", err, slow)
	}
	fmt.Fprintf(conn2, "GET /ask/v1/asks/%s HTTP/1.1\r\nHost: ask.test\r\nAuthorization: Bearer %s\r\nPrefer: wait=1\r\n\r\n", slow.JSON202.Ticket, alice)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("a request on the stream's kept-alive connection: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a request on the stream's kept-alive connection: %d", resp.StatusCode)
	}
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
		ln := newPipeListener()
		hs := &http.Server{Handler: h.srv.Handler()}
		served := make(chan struct{})
		go func() { defer close(served); _ = hs.Serve(ln) }()
		defer func() { _ = hs.Close(); <-served }()
		conn, err := ln.dial()
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		go fmt.Fprintf(conn, "GET /ask/v1/asks/%s/events HTTP/1.1\r\nHost: ask.test\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", tk, alice)
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

// startStalling starts hs (serving srv) on a listener whose connections have small buffers
// (stallListener), shut down with the test.
func startStalling(t *testing.T, srv *server.Server, hs *httptest.Server) {
	t.Helper()
	hs.Listener = stallListener{hs.Listener}
	hs.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		hs.Close()
	})
}

// finishedAsk puts alice's ask "q" to hs and waits (up to 5 s) for its run to end; it returns
// the client it used and the ticket.
func finishedAsk(t *testing.T, hs *httptest.Server) (*gen.ClientWithResponses, string) {
	t.Helper()
	c, err := gen.NewClientWithResponses(hs.URL+"/ask", gen.WithHTTPClient(hs.Client()))
	if err != nil {
		t.Fatal(err)
	}
	cv, err := c.CreateConversationWithResponse(t.Context(), nil, gen.CreateConversationRequest{}, bearer(alice))
	if err != nil || cv.JSON201 == nil {
		t.Fatalf("create conversation: %v %v", err, cv)
	}
	tk, err := c.CreateAskWithResponse(t.Context(), cv.JSON201.Id, nil, gen.AskRequest{Question: "q"}, bearer(alice))
	if err != nil || tk.JSON202 == nil {
		t.Fatalf("create ask: %v %v", err, tk)
	}
	wait := "wait=5"
	if _, err := c.GetAskWithResponse(t.Context(), tk.JSON202.Ticket, &gen.GetAskParams{Prefer: &wait}, bearer(alice)); err != nil {
		t.Fatal(err)
	}
	return c, tk.JSON202.Ticket
}
