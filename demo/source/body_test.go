package source_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/demo/source"
)

// TestABodyThatNeverArrivesIsCut: a request that declares a body and sends less is answered
// and its connection closed once Options.BodyReadTimeout has passed from its header, with a
// bearer or without one. Until 2026-12-06 nothing bounded it (the server's ReadTimeout cannot,
// for it would end every event stream): each such request held a connection and a goroutine
// for good, before authentication too, as askd's did until 2026-12-05.
func TestABodyThatNeverArrivesIsCut(t *testing.T) {
	_, srv := start(t, source.Options{BodyReadTimeout: 100 * time.Millisecond})
	for name, auth := range map[string]string{"no bearer": "", "a bearer": "Authorization: Bearer tok-bob\r\n"} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// A backstop, so that a body the source waits for forever fails the test instead of
			// hanging it.
			c.SetDeadline(time.Now().Add(30 * time.Second))
			io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+srv.Listener.Addr().String()+"\r\n"+auth+
				"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{")
			r := bufio.NewReader(c)
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatalf("no response: %v", err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Errorf("status %d, want an error", resp.StatusCode)
			}
			if _, err := r.ReadByte(); err == nil || strings.Contains(err.Error(), "timeout") {
				t.Errorf("after the response: %v, want the connection closed", err)
			}
		})
	}

	// The deadline is the body's: a call that runs longer than it once its body is in is not cut.
	_, srv = start(t, source.Options{BodyReadTimeout: 50 * time.Millisecond, QueryTimeout: 400 * time.Millisecond})
	res := call(t, connect(t, srv, "tok-bob"), "slow", "run_query",
		map[string]any{"sql": "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"})
	if !strings.Contains(text(res), "400ms limit") {
		t.Errorf("a call running past the body's deadline: %q, want the query's own limit", text(res))
	}
}
