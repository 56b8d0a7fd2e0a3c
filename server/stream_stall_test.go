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
	big := strings.Repeat("x", 1<<20)
	srv, err := server.New(server.Options{
		Authenticator:      fakeAuth{},
		StreamWriteTimeout: 500 * time.Millisecond,
		ShutdownGrace:      -1,
		Runner: ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
			return ask.Outcome{Answer: &gen.AnswerBody{Text: big, Path: gen.AnswerPath{Speed: gen.AnswerPathSpeedFull, Detail: "warehouse"}}}
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv.Handler())
	startStalling(t, srv, hs)
	_, tk := finishedAsk(t, hs)

	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A buffer of 64 KiB, far below the answer, that the client empties as it reads (a smaller
	// one, on loopback's 64 KiB segments, has TCP wait on its persist timer, not the reader).
	_ = conn.(*net.TCPConn).SetReadBuffer(64 << 10)
	fmt.Fprintf(conn, "GET /ask/v1/asks/%s/events HTTP/1.1\r\nHost: ask.test\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", tk, alice)
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
		time.Sleep(5 * time.Millisecond) // the client's pace: slow, never stopped
	}
	if !strings.HasSuffix(got.String(), "\n\n") || !strings.Contains(got.String(), "\nevent: done\n") {
		t.Fatalf("a client reading 4 KiB every 5 ms was let go after %d bytes of a 1 MB answer, without done", got.Len())
	}
}

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
