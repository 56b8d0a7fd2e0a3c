package agent_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/gen"
)

// A source that takes the connection and never answers the handshake ends the run, at the tool
// timeout, in error{transport} saying so — as a tool call that never ends does — not "unreachable
// or broke the protocol", which it did neither of. No model call is made.
func TestSourceSilentOnTheHandshake(t *testing.T) {
	stop := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // so that the server notices the client leave
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer silent.Close()
	defer close(stop)
	m := &scripted{script: []func(model.Request) (model.Response, error){say("must not be asked")}}
	a, err := agent.New(agent.Options{
		Model: m, Sources: []agent.SourceConfig{{Name: "silent", URL: silent.URL + "/mcp"}},
		ToolTimeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	out := a.Run(t.Context(), hostileRequest("tok-silent"), &recorder{})
	if out.Error == nil || !strings.Contains(out.Error.Message, "source silent: connect: no answer within the tool timeout") {
		t.Fatalf("outcome = %s %+v, want error{transport} naming the tool timeout", outcomeType(out), out.Error)
	}
	if len(m.reqs) != 0 {
		t.Errorf("%d model calls, want none", len(m.reqs))
	}
}

// The handshakes with a run's sources run at once: the run waits for the slowest, not their
// sum. Each source here holds its handshake until the other's has arrived too, so one after
// the other would end the run at the tool timeout; at once, the model is asked. And with one
// source down, the run ends in its error, with the other's session, which did open, closed (its
// DELETE sent).
func TestSourcesConnectAtOnce(t *testing.T) {
	s := newStack(t)
	var arrived sync.WaitGroup
	arrived.Add(2)
	var once [2]sync.Once
	release := make(chan struct{}) // at the test's end, so that the servers can close
	gate := func(i int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			once[i].Do(func() {
				arrived.Done()
				done := make(chan struct{})
				go func() { arrived.Wait(); close(done) }()
				select {
				case <-done:
				case <-r.Context().Done():
				case <-release:
				}
			})
			if r.Context().Err() != nil {
				return
			}
			s.source.Config.Handler.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/mcp"
	}
	one, two := gate(0), gate(1)
	t.Cleanup(func() { close(release) }) // before the servers' Close (cleanups run last first)
	m := &scripted{script: []func(model.Request) (model.Response, error){say("both sources are here")}}
	a, err := agent.New(agent.Options{
		Model:       m,
		Sources:     []agent.SourceConfig{{Name: "one", URL: one}, {Name: "two", URL: two}},
		ToolTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if out := a.Run(t.Context(), s.request(t, "alice", "anything"), &recorder{}); out.Error != nil || len(m.reqs) != 1 {
		t.Fatalf("outcome %s %+v after %d model calls, want the model asked once: the handshakes ran one after the other",
			outcomeType(out), out.Error, len(m.reqs))
	}

	var mu sync.Mutex
	var deletes int
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			mu.Lock()
			deletes++
			mu.Unlock()
		}
		s.source.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	m = &scripted{script: []func(model.Request) (model.Response, error){say("must not be asked")}}
	a, err = agent.New(agent.Options{
		Model:   m,
		Sources: []agent.SourceConfig{{Name: "up", URL: up.URL + "/mcp"}, {Name: "down", URL: down.URL + "/mcp"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := a.Run(t.Context(), s.request(t, "alice", "anything"), &recorder{})
	if out.Error == nil || !strings.Contains(out.Error.Message, "source down") || len(m.reqs) != 0 {
		t.Fatalf("outcome %s %+v after %d model calls, want error{transport} naming source down", outcomeType(out), out.Error, len(m.reqs))
	}
	mu.Lock()
	defer mu.Unlock()
	if deletes != 1 {
		t.Errorf("source up's session: %d DELETEs, want 1 (the session closed when the run ended)", deletes)
	}
}

// A run that ends (a cancel, its deadline) while one source's handshake is still waiting closes
// the sessions the other sources did open at once, not when the slowest handshake ends (the
// tool timeout, for a source that hangs). Held until then, a cancelled ask kept a session open
// at every answering source for up to a minute, however soon it ended: an identity that
// cancelled a few dozen asks while one source hung held its 32 sessions at the others (the
// demo source's cap per identity, found by the phase-2 soak), which then refused it with 429.
func TestEndedRunClosesTheSessionsThatOpened(t *testing.T) {
	s := newStack(t)
	deleted := make(chan struct{})
	var once sync.Once
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.source.Config.Handler.ServeHTTP(w, r)
		if r.Method == http.MethodDelete {
			once.Do(func() { close(deleted) })
		}
	}))
	t.Cleanup(up.Close)
	waiting := make(chan struct{}, 1)
	stop := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case waiting <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(silent.Close)
	a, err := agent.New(agent.Options{
		Model:       &scripted{script: []func(model.Request) (model.Response, error){say("must not be asked")}},
		Sources:     []agent.SourceConfig{{Name: "up", URL: up.URL + "/mcp"}, {Name: "silent", URL: silent.URL + "/mcp"}},
		ToolTimeout: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ended := make(chan ask.Outcome, 1)
	go func() { ended <- a.Run(ctx, s.request(t, "alice", "anything"), &recorder{}) }()
	<-waiting
	cancel()
	select {
	case <-deleted:
	case <-time.After(10 * time.Second): // a bound for the failure only: the fix closes it at once
		t.Error("source up's session still open 10 s after the run was cancelled: held until the silent source's handshake ends")
	}
	close(stop) // the silent handshake ends; the run returns
	if out := <-ended; out.Error == nil || out.Error.Kind != gen.ErrorKindCancelled {
		t.Errorf("outcome %s %+v, want error{cancelled}", outcomeType(out), out.Error)
	}
}

// A source that hangs on the handshake is named in a warning, source unreachable, even when
// the ask's deadline ends the run before the tool timeout ends the handshake: before, the
// warning was logged only when the run was still going, so with a deadline shorter than the
// tool timeout (DAS_ASK_DEADLINE_S=5) every ask ended in a timeout and no line said which
// source held it.
func TestSourceSilentPastTheDeadlineIsNamed(t *testing.T) {
	stop := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer silent.Close()
	defer close(stop)
	var logs logSink
	a, err := agent.New(agent.Options{
		Model:       &scripted{script: []func(model.Request) (model.Response, error){say("must not be asked")}},
		Sources:     []agent.SourceConfig{{Name: "silent", URL: silent.URL + "/mcp"}},
		ToolTimeout: 300 * time.Millisecond,
		Logger:      logs.logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond) // the ask's deadline, before the tool timeout
	defer cancel()
	a.Run(ctx, hostileRequest("tok-silent"), &recorder{})
	got := logs.String()
	if !strings.Contains(got, `"msg":"source unreachable"`) || !strings.Contains(got, `"source":"silent"`) || !strings.Contains(got, "no answer within the tool timeout") {
		t.Errorf("no warning names the silent source; the log:\n%s", got)
	}
}
