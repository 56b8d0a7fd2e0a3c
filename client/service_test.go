package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// tokens is a fake Authenticator: a known token names its oid; anything else is refused.
type tokens map[string]string

func (t tokens) Authenticate(_ context.Context, raw string) (ask.Identity, error) {
	oid, ok := t[raw]
	if !ok {
		return ask.Identity{}, errors.New("unknown token")
	}
	return ask.Identity{OID: oid, Tenant: "test", Token: raw}, nil
}

// scripted is a Runner that acts out the question: "answer", "steps", "gated".
type scripted struct {
	gate chan struct{} // "gated" waits here between its halves
}

func (s *scripted) Run(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
	step := func(tool string) {
		emit.Step(gen.StepBody{CallId: "c-" + tool, Tool: tool, Source: "demo", Args: map[string]any{}, Ms: 1})
	}
	switch req.Question {
	case "steps":
		for range 30 {
			step("run_query")
		}
	case "gated":
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseGrounding, Subject: "incident", Source: "demo"})
		step("search_catalog")
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ask.Outcome{}
		}
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseQuerying, Subject: "incidents", Source: "demo"})
		step("run_query")
	default:
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseQuerying, Subject: "incidents", Source: "demo"})
		step("run_query")
	}
	return ask.Outcome{Answer: &gen.AnswerBody{
		Text: "There were 3.", Caveats: []gen.Caveat{}, Provenance: []gen.Provenance{}, Sql: []string{"select 3"},
		Path: gen.AnswerPath{Speed: gen.AnswerPathSpeedFull, Detail: "warehouse"},
	}}
}

// service is the real ask service in process, on a loopback httptest server.
type service struct {
	srv    *server.Server
	http   *httptest.Server
	runner *scripted
	hits   atomic.Int32 // requests that reached the service
}

func startService(t *testing.T, maxEvents int) *service {
	t.Helper()
	svc := &service{runner: &scripted{gate: make(chan struct{})}}
	srv, err := server.New(server.Options{
		Runner: svc.runner, Authenticator: tokens{"alice-token": "alice", "bob-token": "bob"},
		MaxEvents: maxEvents,
	})
	if err != nil {
		t.Fatal(err)
	}
	svc.srv = srv
	svc.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		svc.hits.Add(1)
		srv.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		svc.http.Close()
	})
	return svc
}

func (svc *service) client(t *testing.T, base, token string, tr *http.Transport) *client.Client {
	t.Helper()
	c, err := client.New(base+"/ask", client.Options{
		Token: client.StaticToken(token), HTTPClient: &http.Client{Transport: tr},
		Reconnect: client.Reconnect{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ask1(t *testing.T, c *client.Client, question string) gen.Ticket {
	t.Helper()
	conv, err := c.CreateConversation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tk, err := c.Ask(t.Context(), conv.Id, question)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestServiceWholeRun(t *testing.T) {
	svc := startService(t, 0)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := svc.client(t, svc.http.URL, "alice-token", tr)
	tk := ask1(t, c, "answer")
	evs, err := collect(t, c.Events(t.Context(), tk.Ticket, client.EventsOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	assertContiguous(t, evs, len(evs))
	out, err := client.Collect(func(yield func(client.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	})
	if err != nil || out.Kind != client.Answer || out.Answer.Text != "There were 3." {
		t.Fatalf("got %v %v, want the answer", out.Kind, err)
	}
	if q, ok := evs[0].Value.(gen.AcceptedEvent); !ok || q.Question != "answer" {
		t.Errorf("first event %#v, want accepted with the question", evs[0].Value)
	}
	if out.Done.Steps != 1 || out.MissedSteps != 0 {
		t.Errorf("done.steps %d missed %d, want 1 and 0", out.Done.Steps, out.MissedSteps)
	}

	st, err := c.Status(t.Context(), tk.Ticket, time.Second)
	if err != nil || st.State != gen.AskStateAnswer || st.Done == nil {
		t.Fatalf("status %+v, %v; want answer with done", st, err)
	}
	ca, err := c.Cancel(t.Context(), tk.Ticket)
	if err != nil || ca.State != gen.AskStateAnswer {
		t.Fatalf("cancel after done: %+v, %v; want 202 that changes nothing", ca, err)
	}
}

// A killable proxy between client and service cuts the stream mid-run; the client resumes
// through it with Last-Event-ID and sees every event once.
func TestServiceResumeThroughKilledProxy(t *testing.T) {
	svc := startService(t, 0)
	target, _ := url.Parse(svc.http.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	var lastIDs, resumedAt atomic.Value
	lastIDs.Store("")
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/events") {
			lastIDs.Store(lastIDs.Load().(string) + "[" + r.Header.Get("Last-Event-ID") + "]")
			if r.Header.Get("Last-Event-ID") != "" {
				resumedAt.Store(time.Now())
			}
		}
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	// The first backoff is at most 10 ms; Max (5 s) leaves room for the server's retry.
	c, err := client.New(proxy.URL+"/ask", client.Options{
		Token: client.StaticToken("alice-token"), HTTPClient: &http.Client{Transport: tr},
		Reconnect: client.Reconnect{Initial: 10 * time.Millisecond, Max: 5 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	tk := ask1(t, c, "gated")

	var evs []client.Event
	killed := false
	var killedAt time.Time
	for ev, err := range c.Events(t.Context(), tk.Ticket, client.EventsOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		if _, ok := ev.Value.(gen.StepEvent); ok && !killed {
			killed, killedAt = true, time.Now()
			proxy.CloseClientConnections() // the cut
			close(svc.runner.gate)         // the run goes on while the client is away
		}
	}
	assertContiguous(t, evs, len(evs))
	if !evs[len(evs)-1].IsDone() || evs[len(evs)-2].Outcome() != client.Answer {
		t.Fatalf("the stream did not end with answer, done: %v", seqs(evs))
	}
	got := strings.Split(strings.TrimSuffix(strings.TrimPrefix(lastIDs.Load().(string), "["), "]"), "][")
	if len(got) != 2 || got[0] != "" || got[1] == "" {
		t.Errorf("Last-Event-ID per connection %q, want a first connection without and a resume with one", got)
	}
	// The service's stream says "retry: 2000"; the client's own first backoff here is at most
	// 10 ms, so a resume 2 s or more after the cut is the server's retry honoured (a lower bound).
	if at, ok := resumedAt.Load().(time.Time); !ok || at.Sub(killedAt) < 2*time.Second {
		t.Errorf("resumed %v after the cut, want at least the server's retry of 2s", at.Sub(killedAt))
	}
}

func TestServiceUnauthorizedNotRetried(t *testing.T) {
	svc := startService(t, 0)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	alice := svc.client(t, svc.http.URL, "alice-token", tr)
	tk := ask1(t, alice, "answer")
	before := svc.hits.Load()
	forged := svc.client(t, svc.http.URL, "forged", tr)
	_, err := collect(t, forged.Events(t.Context(), tk.Ticket, client.EventsOptions{}))
	if !errors.Is(err, client.ErrUnauthorized) {
		t.Fatalf("got %v, want ErrUnauthorized", err)
	}
	if n := svc.hits.Load() - before; n != 1 {
		t.Errorf("got %d requests, want exactly 1: 401 is final", n)
	}
	// Another identity's ticket is 404, also final.
	bob := svc.client(t, svc.http.URL, "bob-token", tr)
	before = svc.hits.Load()
	if _, err := collect(t, bob.Events(t.Context(), tk.Ticket, client.EventsOptions{})); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
	if n := svc.hits.Load() - before; n != 1 {
		t.Errorf("got %d requests, want exactly 1: 404 is final", n)
	}
}

// With a log bound of 8 and 30 steps, the service evicts steps before the client reads them;
// done.steps tells the client how many it did not see.
func TestServiceReportsEvictedSteps(t *testing.T) {
	svc := startService(t, 8)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := svc.client(t, svc.http.URL, "alice-token", tr)
	tk := ask1(t, c, "steps")
	if st, err := c.Status(t.Context(), tk.Ticket, 10*time.Second); err != nil || st.State == gen.AskStateRunning {
		t.Fatalf("status %+v, %v; want the run ended", st, err)
	}
	var steps int64
	var done client.Event
	for ev, err := range c.Events(t.Context(), tk.Ticket, client.EventsOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ev.Value.(gen.StepEvent); ok {
			steps++
		}
		done = ev
	}
	d, ok := done.Value.(gen.DoneEvent)
	if !ok || d.Steps != 30 {
		t.Fatalf("last event %#v, want done with 30 steps", done.Value)
	}
	if done.MissedSteps == 0 || steps+done.MissedSteps != 30 {
		t.Errorf("received %d steps, missed %d; want a gap that accounts for all 30", steps, done.MissedSteps)
	}
}

func TestServiceCancelContextLeavesNothing(t *testing.T) {
	svc := startService(t, 0)
	tr := &http.Transport{}
	c := svc.client(t, svc.http.URL, "alice-token", tr)
	tk := ask1(t, c, "gated")
	opts := []goleak.Option{goleak.IgnoreCurrent()}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var n int
	var last error
	for ev, err := range c.Events(ctx, tk.Ticket, client.EventsOptions{}) {
		if err != nil {
			last = err
			break
		}
		n++
		if _, ok := ev.Value.(gen.StepEvent); ok {
			cancel()
		}
	}
	if !errors.Is(last, context.Canceled) || n == 0 {
		t.Fatalf("got %d events and %v, want events then context.Canceled", n, last)
	}
	tr.CloseIdleConnections()
	// The client's goroutines are gone; the service's own (its server, the run) are not ours.
	goleak.VerifyNone(t, append(opts,
		goleak.IgnoreTopFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("github.com/das-ask/ask/client_test.(*scripted).Run"),
	)...)
	if _, err := c.Cancel(t.Context(), tk.Ticket); err != nil {
		t.Fatal(err)
	}
	out, err := c.Wait(t.Context(), tk.Ticket)
	if err != nil || out.Kind != client.Error || out.Error.Kind != gen.ErrorKindCancelled {
		t.Fatalf("after cancel: %v %+v, want error{cancelled}", err, out.Error)
	}
}
