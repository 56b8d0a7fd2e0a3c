package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/memnet"
	"github.com/das-ask/ask/server"
)

var quick = client.Retry{Initial: time.Millisecond, Max: 5 * time.Millisecond}

// TestAskSurvivesALostReply (net/http may retry this one itself: a request carrying an
// Idempotency-Key counts as idempotent): the service takes the first createAsk and creates its ticket,
// then the connection drops before the reply (a lost reply); the client retries with the same
// Idempotency-Key and gets that ticket, and the ask runs once.
func TestAskSurvivesALostReply(t *testing.T) {
	var runs atomic.Int64
	srv, err := server.New(server.Options{
		Authenticator: tokens{"alice-token": "alice"},
		Runner: ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
			runs.Add(1)
			return ask.Outcome{Answer: &gen.AnswerBody{Text: "42", Caveats: []gen.Caveat{}, Provenance: []gen.Provenance{}, Sql: []string{},
				Path: gen.AnswerPath{Speed: gen.AnswerPathSpeedFast, Detail: "catalog"}}}
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var keys []string
	var firstTicket string
	dropped := false
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/asks") {
			mu.Lock()
			keys = append(keys, r.Header.Get("Idempotency-Key"))
			drop := !dropped
			dropped = true
			mu.Unlock()
			if drop {
				rec := httptest.NewRecorder()
				srv.Handler().ServeHTTP(rec, r)
				body := rec.Body.String()
				if i := strings.Index(body, `"ticket":"`); i >= 0 {
					firstTicket = strings.SplitN(body[i+10:], `"`, 2)[0]
				}
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
		}
		srv.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		hs.Close()
	})
	c, err := client.New(hs.URL+"/ask", client.Options{Token: client.StaticToken("alice-token"), Retry: quick})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	conv, err := c.CreateConversation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := c.Ask(ctx, conv.Id, "How many sev1 incidents did we have in 2026-Q2?")
	if err != nil {
		t.Fatal(err)
	}
	if firstTicket == "" || tk.Ticket != firstTicket {
		t.Errorf("the retry answered %q, the lost reply held %q", tk.Ticket, firstTicket)
	}
	if len(keys) != 2 || keys[0] != keys[1] || !strings.HasPrefix(keys[0], `"`) {
		t.Errorf("Idempotency-Key per attempt: %q, want the same sf-string twice", keys)
	}
	if _, err := c.Status(ctx, tk.Ticket, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the ask ran %d times, want once", n)
	}
}

// flaky answers each status in turn, then 201, recording the Idempotency-Key of each attempt.
func flaky(statuses ...int) (http.Handler, *[]string) {
	var mu sync.Mutex
	var keys []string
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		n := len(keys)
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		if n < len(statuses) {
			w.Header().Set("Content-Type", "application/problem+json")
			body := `{"type":"about:blank","title":"x","status":` + strconv.Itoa(statuses[n]) + `}`
			if statuses[n] == http.StatusConflict {
				w.Header().Set("Retry-After", "0")
				body = `{"type":"urn:ask:problem:idempotency-key-in-progress","title":"Conflict","status":409}`
			}
			w.WriteHeader(statuses[n])
			_, _ = io.WriteString(w, body)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"cv","created_at":"2026-11-29T20:00:00Z"}`)
	}), &keys
}

// TestCreateRetriesTransientStatuses: 502, 503, 504 and an in-progress 409 are retried with
// the same key; the call then succeeds.
func TestCreateRetriesTransientStatuses(t *testing.T) {
	h, keys := flaky(502, 503, 504, 409)
	c := memClient(t, h, client.Options{Retry: quick})
	cv, err := c.CreateConversation(t.Context())
	if err != nil || cv.Id != "cv" {
		t.Fatalf("create: %+v, %v", cv, err)
	}
	if len(*keys) != 5 {
		t.Fatalf("%d attempts, want 5", len(*keys))
	}
	for _, k := range *keys {
		if k != (*keys)[0] || k == "" {
			t.Errorf("keys %q: want one key on every attempt", *keys)
		}
	}
}

// TestCreateDoesNotRetryRefusals: a refusal a retry cannot cure is answered at once.
func TestCreateDoesNotRetryRefusals(t *testing.T) {
	for _, st := range []int{400, 404, 413, 422, 429, 500} {
		h, keys := flaky(st)
		c := memClient(t, h, client.Options{Retry: quick})
		_, err := c.CreateConversation(t.Context())
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.StatusCode != st || len(*keys) != 1 {
			t.Errorf("%d: err %v after %d attempts, want the APIError after one", st, err, len(*keys))
		}
	}
	h, keys := flaky(503, 503, 503)
	c := memClient(t, h, client.Options{Retry: client.Retry{Initial: time.Millisecond, Attempts: 2}})
	if _, err := c.CreateConversation(t.Context()); err == nil || len(*keys) != 2 {
		t.Errorf("attempts capped at 2: err %v after %d", err, len(*keys))
	}
}

// TestHeaderTimeout: a service that never answers (a frozen replica) costs the header timeout,
// then the retry goes through; a long-poll's own wait is added to the bound.
func TestHeaderTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := calls.Add(1)
			if n == 1 || r.Header.Get("Prefer") != "" {
				select { // frozen, or a long poll that takes its time
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Second):
				}
			}
			if r.Method == http.MethodGet {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"ticket":"tk","conversation_id":"cv","state":"running","last_seq":1,"created_at":"2026-11-29T20:00:00Z"}`)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"id":"cv","created_at":"2026-11-29T20:00:00Z"}`)
		})
		c := memClient(t, h, client.Options{Retry: quick, HeaderTimeout: 3 * time.Second})
		start := time.Now()
		if _, err := c.CreateConversation(t.Context()); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < 3*time.Second || took > 4*time.Second {
			t.Errorf("create took %v, want the 3 s header timeout and one retry", took)
		}
		// Prefer: wait=30 allows 33 s; the service answers after 20.
		calls.Store(10)
		start = time.Now()
		if _, err := c.Status(t.Context(), "tk", 30*time.Second); err != nil {
			t.Fatalf("long poll within its wait: %v", err)
		}
		if took := time.Since(start); took != 20*time.Second {
			t.Errorf("long poll took %v, want 20s (one attempt)", took)
		}
	})
}

// TestRefusedBeforeAnyResponseIsFinal: nothing listening at the URL is said at once; once the
// service has answered, a refused connection (a restart) is retried.
func TestRefusedBeforeAnyResponseIsFinal(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"cv","created_at":"2026-11-29T20:00:00Z"}`)
	}))
	addr := hs.Listener.Addr().String()
	hs.Close() // nothing listens there now
	var retries atomic.Int64
	c, err := client.New("http://"+addr+"/ask", client.Options{Retry: quick, Logger: countingLogger(&retries)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateConversation(t.Context()); err == nil || retries.Load() != 0 {
		t.Fatalf("nothing listening: err %v after %d retries, want the error at once", err, retries.Load())
	}
	// So is following a ticket there (`ask follow` with a wrong URL): not a reconnect budget's
	// worth of refusals (about 70 s at the defaults) before the error.
	var reconnects atomic.Int64
	cs, err := client.New("http://"+addr+"/ask", client.Options{Logger: slog.New(messageCounter{"event stream reconnecting", &reconnects})})
	if err != nil {
		t.Fatal(err)
	}
	var streamErr error
	for _, err := range cs.Events(t.Context(), "t_x", client.EventsOptions{}) {
		if err != nil {
			streamErr = err
			break
		}
	}
	if !errors.Is(streamErr, syscall.ECONNREFUSED) || reconnects.Load() != 0 {
		t.Fatalf("a stream with nothing listening: %v after %d reconnects, want the refusal at once", streamErr, reconnects.Load())
	}

	// A service that answers once, then goes away (a restart: refused).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"cv","created_at":"2026-11-29T20:00:00Z"}`)
	}))
	defer srv.Close()
	c2, err := client.New(srv.URL+"/ask", client.Options{Retry: client.Retry{Initial: 50 * time.Millisecond, Max: 100 * time.Millisecond}, Logger: countingLogger(&retries)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.CreateConversation(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections()
	_ = srv.Listener.Close() // refused from now on
	if _, err := c2.CreateConversation(t.Context()); err == nil || retries.Load() == 0 {
		t.Errorf("after a response, a refused connection: err %v after %d retries, want retries", err, retries.Load())
	}
}

// A stream whose service goes away after it answered (a restart: the connection is refused
// for a moment) is resumed once it is back, with no gap: only a refusal before this client ever
// had a response is final. The client here made no call before the stream, so it is the
// stream's own response that marks the service reached.
func TestStreamResumedThroughARefusal(t *testing.T) {
	frames := script(t, 2)
	var dials atomic.Int32
	var lastIDs []string
	var mu sync.Mutex
	served := memnet.Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		n := len(lastIDs)
		mu.Unlock()
		sseHeaders(w)
		if n == 1 {
			for _, f := range frames[:3] { // then the service goes away
				_, _ = io.WriteString(w, f)
			}
			return
		}
		for _, f := range frames[3:] {
			_, _ = io.WriteString(w, f)
		}
	})}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tr := roundTrip(func(r *http.Request) (*http.Response, error) {
		if dials.Add(1) == 2 { // the service is restarting
			return nil, refused
		}
		return served.RoundTrip(r)
	})
	c, err := client.New("http://ask.test/ask", client.Options{HTTPClient: &http.Client{Transport: tr},
		Reconnect: client.Reconnect{Initial: time.Millisecond, Max: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	var evs []client.Event
	for ev, err := range c.Events(t.Context(), "tk", client.EventsOptions{}) {
		if err != nil {
			t.Fatalf("after %d events: %v, want the stream resumed once the service is back", len(evs), err)
		}
		evs = append(evs, ev)
	}
	if len(evs) != len(frames) || evs[len(evs)-1].Seq != int64(len(frames)) {
		t.Fatalf("got %d events, want all %d", len(evs), len(frames))
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "3"; len(lastIDs) != 2 || lastIDs[1] != want {
		t.Errorf("Last-Event-ID per connection %q, want the second to resume after %s", lastIDs, want)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countingLogger counts the calls' retries.
func countingLogger(n *atomic.Int64) *slog.Logger {
	return slog.New(messageCounter{"request retrying", n})
}

// messageCounter counts the records whose message is msg.
type messageCounter struct {
	msg string
	n   *atomic.Int64
}

func (h messageCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h messageCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}
func (h messageCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h messageCounter) WithGroup(string) slog.Handler      { return h }
