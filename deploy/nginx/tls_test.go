package nginx_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/deploy/nginx/nginxtest"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

const tlsToken = "tok-alice"

type tlsAuth struct{}

func (tlsAuth) Authenticate(_ context.Context, tok string) (ask.Identity, error) {
	if tok != tlsToken {
		return ask.Identity{}, errors.New("unknown token")
	}
	return ask.Identity{OID: "alice", Tenant: "t1", Token: tok}, nil
}

// seen records the headers of every request that reached the service.
type seen struct {
	mu  sync.Mutex
	hdr []http.Header
}

func (s *seen) last() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hdr[len(s.hdr)-1]
}

// TestTLSAndHTTP2: the gateway as docs/scale-out.md's "TLS and HTTP/2" runs it — TLS
// terminated at nginx, HTTP/2 to the client, HTTP/1.1 to the replica — passes the headers the
// service reads (X-Forwarded-Proto: https among them), streams every event when it is written
// and the keep-alives past its idle timeout, resumes from Last-Event-ID, and refuses a body over
// its limit with problem+json, as it does over HTTP/1.1.
func TestTLSAndHTTP2(t *testing.T) {
	step := make(chan struct{})
	runner := ask.RunnerFunc(func(ctx context.Context, _ ask.Request, emit ask.Emitter) ask.Outcome {
		for range 4 {
			select {
			case <-step:
			case <-ctx.Done():
				return ask.Outcome{}
			}
			emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseGrounding, Subject: "incident", Source: "demo"})
		}
		return ask.Outcome{Answer: &gen.AnswerBody{Text: "Three.", Caveats: []gen.Caveat{}, Provenance: []gen.Provenance{},
			Sql: []string{}, Path: gen.AnswerPath{Speed: gen.AnswerPathSpeedFast, Detail: "catalog"}}}
	})
	srv, err := server.New(server.Options{Runner: runner, Authenticator: tlsAuth{}, KeepAlive: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var got seen
	h := srv.Handler()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.mu.Lock()
		got.hdr = append(got.hdr, r.Header.Clone())
		got.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(upstream.Close)
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	addr, pool := nginxtest.StartTLS(t, strings.TrimPrefix(upstream.URL, "http://"))
	base := "https://" + addr + "/ask/v1"
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	t.Cleanup(client.CloseIdleConnections)

	do := func(method, url, body string, hdr ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tlsToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s %s: answered over %s, want HTTP/2", method, url, resp.Proto)
		}
		return resp
	}
	decode := func(resp *http.Response, status int, v any) {
		t.Helper()
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != status {
			t.Fatalf("%d %q, want %d", resp.StatusCode, b, status)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}

	resp := do(http.MethodPost, base+"/conversations", "{}", "Idempotency-Key", `"k1"`)
	var conv struct {
		ID      string `json:"id"`
		AsksURL string `json:"asks_url"`
	}
	decode(resp, http.StatusCreated, &conv)
	hdr := got.last()
	for name, want := range map[string]string{
		"Authorization": "Bearer " + tlsToken, "Idempotency-Key": `"k1"`, "X-Forwarded-Proto": "https",
		"X-Forwarded-For": "127.0.0.1", "X-Request-Id": resp.Header.Get("X-Request-Id"),
	} {
		if v := hdr.Values(name); len(v) != 1 || v[0] != want {
			t.Errorf("the replica got %s %q, want %q", name, v, want)
		}
	}
	// The service hands out paths, resolved by the client against the https URL it called.
	if loc := resp.Header.Get("Location"); loc != conv.AsksURL || !strings.HasPrefix(loc, "/ask/v1/conversations/") {
		t.Errorf("Location %q, asks_url %q: want the same path under /ask", loc, conv.AsksURL)
	}

	var tk struct {
		EventsURL string `json:"events_url"`
	}
	decode(do(http.MethodPost, "https://"+addr+conv.AsksURL, `{"question":"How many sev1 incidents?"}`), http.StatusAccepted, &tk)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	release := func() { // the run's next milestone
		t.Helper()
		select {
		case step <- struct{}{}:
		case <-ctx.Done():
			t.Fatal("the run no longer waits for its next step")
		}
	}
	stream := func(lastEventID string) (*bufio.Reader, func()) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+tk.EventsURL, nil)
		req.Header.Set("Authorization", "Bearer "+tlsToken)
		if lastEventID != "" {
			req.Header.Set("Last-Event-ID", lastEventID)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
			t.Fatalf("the stream: %d over %s", resp.StatusCode, resp.Proto)
		}
		return bufio.NewReader(resp.Body), func() { _ = resp.Body.Close() }
	}
	// next reads the stream up to its next event and returns its id and type.
	next := func(r *bufio.Reader) (id, typ string) {
		t.Helper()
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("the stream ended (%v) before its next event", err)
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				typ = strings.TrimPrefix(line, "event: ")
			case line == "" && typ != "":
				return id, typ
			}
		}
	}

	r, closeStream := stream("")
	for _, want := range []string{"accepted", "branch"} {
		if _, typ := next(r); typ != want {
			t.Fatalf("event %q, want %q", typ, want)
		}
	}
	// Each milestone is read before the next is written: a gateway that buffered the stream
	// would hold it back, and the read would wait out ctx.
	for range 3 {
		release()
		if _, typ := next(r); typ != "milestone" {
			t.Fatalf("event %q, want a milestone", typ)
		}
	}
	// A silence longer than the gateway's idle timeout for streams (2 s in nginxtest) is kept
	// open by the service's keep-alive comments, which reach the client.
	quiet := time.Now()
	keepalives := 0
	for time.Since(quiet) < 3*time.Second {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended (%v) after %v of silence", err, time.Since(quiet))
		}
		if line == ": keepalive\n" {
			keepalives++
		}
	}
	if keepalives < 2 {
		t.Errorf("%d keep-alives in %v of silence, want them every 500ms", keepalives, time.Since(quiet))
	}
	release()
	var last string
	for _, want := range []string{"milestone", "branch", "answer", "done"} {
		id, typ := next(r)
		if typ != want {
			t.Fatalf("event %q, want %q", typ, want)
		}
		last = id
	}
	closeStream()
	if last != "9" {
		t.Fatalf("done is event %s, want 9", last)
	}

	// A reconnect resumes after the cursor, without a gap or a repeat.
	r, closeStream = stream("5")
	defer closeStream()
	if v := got.last().Values("Last-Event-Id"); len(v) != 1 || v[0] != "5" {
		t.Errorf("the replica got Last-Event-ID %q, want 5", v)
	}
	for _, want := range []string{"6", "7", "8", "9"} {
		if id, _ := next(r); id != want {
			t.Fatalf("after Last-Event-ID 5: event %s, want %s", id, want)
		}
	}

	// A body over client_max_body_size: nginx's own 413 is problem+json over HTTP/2 too.
	resp = do(http.MethodPost, base+"/conversations", `{"x":"`+strings.Repeat("a", 90000)+`"}`)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var p struct{ Status int }
	if resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Header.Get("Content-Type") != "application/problem+json" ||
		json.Unmarshal(b, &p) != nil || p.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over the limit over HTTP/2: %d %s %q, want 413 problem+json", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}
