package agent_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/agent/model"
	demosource "github.com/das-ask/ask/demo/source"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/memnet"
)

// A run that ends while a source's handshake hangs leaves that handshake only a bounded
// linger, and only while its source has a lingering slot free: asks cancelled in a loop
// against a source that never answers held a connection and its goroutines each for the whole
// tool timeout (a minute), beyond the identity's in-flight cap — 300 cancelled asks held about
// 1,400 goroutines and 270 connections for 60 s. Now, once they are cancelled, the handshakes
// that find no slot end at once, at most MaxLingeringHandshakes linger, and those end when the
// linger does, each named in a warning; the answering source's sessions are all closed (each
// one opened was DELETEd: no orphan).
func TestEndedRunsHandshakesLingerBounded(t *testing.T) {
	const (
		runs   = 10
		slots  = 3
		linger = 3 * time.Second
	)
	synctest.Test(t, func(t *testing.T) {
		src, err := demosource.New(t.Context(), demosource.Options{Authenticator: tokenAuth{}})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		// On a failure, what the runs still hold ends by the tool timeout (a minute): the
		// bubble can then end.
		defer time.Sleep(2 * time.Minute)
		up := &sessionCount{next: src.Handler()}
		var (
			mu      sync.Mutex
			waiting int // handshakes the silent source holds
		)
		silent := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			mu.Lock()
			waiting++
			mu.Unlock()
			<-r.Context().Done()
			mu.Lock()
			waiting--
			mu.Unlock()
		})
		held := func() int {
			mu.Lock()
			defer mu.Unlock()
			return waiting
		}
		var logs logSink
		a, err := agent.New(agent.Options{
			Model:                  &scripted{script: []func(model.Request) (model.Response, error){say("must not be asked")}},
			Sources:                []agent.SourceConfig{{Name: "up", URL: "http://up.test/mcp"}, {Name: "silent", URL: "http://silent.test/mcp"}},
			HTTPClient:             &http.Client{Transport: hosts{"up.test": up, "silent.test": silent}},
			ToolTimeout:            time.Minute,
			HandshakeLinger:        linger,
			MaxLingeringHandshakes: slots,
			Logger:                 logs.logger(),
		})
		if err != nil {
			t.Fatal(err)
		}

		ended := make(chan ask.Outcome, runs)
		cancels := make([]context.CancelFunc, runs)
		for i := range cancels {
			ctx, cancel := context.WithCancel(t.Context())
			cancels[i] = cancel
			go func() { ended <- a.Run(ctx, hostileRequest("tok-alice"), &recorder{}) }()
		}
		synctest.Wait()
		if got := held(); got != runs {
			t.Fatalf("the silent source holds %d handshakes, want %d before the cancels", got, runs)
		}
		if got := up.open(); got != runs {
			t.Fatalf("%d sessions open at source up, want %d before the cancels", got, runs)
		}
		for _, cancel := range cancels {
			cancel()
		}
		synctest.Wait()
		if got := len(ended); got != runs-slots {
			t.Errorf("%d runs returned at once after the cancels, want %d (all but the %d lingering)", got, runs-slots, slots)
		}
		if got := held(); got != slots {
			t.Errorf("the silent source still holds %d handshakes after the cancels, want %d (the lingering slots)", got, slots)
		}
		if got := up.open(); got != 0 {
			t.Errorf("%d sessions still open at source up after the cancels, want 0", got)
		}

		time.Sleep(linger - time.Millisecond)
		synctest.Wait()
		if got := held(); got != slots {
			t.Errorf("%d handshakes left just before the linger's end, want %d", got, slots)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := held(); got != 0 {
			t.Errorf("the silent source still holds %d handshakes at the linger's end, want none", got)
		}
		if got := len(ended); got != runs {
			t.Fatalf("%d of %d runs returned at the linger's end", got, runs)
		}
		for range runs {
			if out := <-ended; out.Error == nil || out.Error.Kind != gen.ErrorKindCancelled {
				t.Errorf("outcome %s %+v, want error{cancelled}", outcomeType(out), out.Error)
			}
		}
		if got, want := strings.Count(logs.String(), `"msg":"source unreachable","ticket":"tkt_hostile","source":"silent"`), slots; got != want {
			t.Errorf("%d warnings name the silent source, want %d (one a lingering handshake); the log:\n%s", got, want, logs.String())
		}
		if !strings.Contains(logs.String(), "no answer within 3s of the run's end") {
			t.Errorf("no warning says the handshake outlived its linger; the log:\n%s", logs.String())
		}
		if got := up.opened(); got != runs {
			t.Errorf("%d sessions opened at source up, want %d", got, runs)
		}
	})
}

// A source that answers the handshake a moment after the run ended, within the linger, has its
// session closed (DELETEd), not left to its idle timeout: the handshake is not cancelled with
// the run (the orphan sessions found by hardening TestLoadAndSoak).
func TestEndedRunsSlowHandshakeIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src, err := demosource.New(t.Context(), demosource.Options{Authenticator: tokenAuth{}})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		arrived := make(chan struct{}, 1)
		h := src.Handler()
		slow := &sessionCount{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Mcp-Session-Id") == "" {
				select {
				case arrived <- struct{}{}:
				default:
				}
				time.Sleep(time.Second) // the run ends meanwhile
			}
			h.ServeHTTP(w, r)
		})}
		a, err := agent.New(agent.Options{
			Model:      &scripted{script: []func(model.Request) (model.Response, error){say("must not be asked")}},
			Sources:    []agent.SourceConfig{{Name: "slow", URL: "http://slow.test/mcp"}},
			HTTPClient: &http.Client{Transport: hosts{"slow.test": slow}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		ended := make(chan ask.Outcome, 1)
		go func() { ended <- a.Run(ctx, hostileRequest("tok-alice"), &recorder{}) }()
		<-arrived
		cancel()
		if out := <-ended; out.Error == nil || out.Error.Kind != gen.ErrorKindCancelled {
			t.Errorf("outcome %s %+v, want error{cancelled}", outcomeType(out), out.Error)
		}
		synctest.Wait() // the DELETE's handler has returned
		if opened, open := slow.opened(), slow.open(); opened != 1 || open != 0 {
			t.Errorf("%d sessions opened, %d still open; want 1 opened and closed", opened, open)
		}
	})
}

// tokenAuth accepts "tok-<oid>" as oid.
type tokenAuth struct{}

func (tokenAuth) Authenticate(_ context.Context, raw string) (ask.Identity, error) {
	oid, ok := strings.CutPrefix(raw, "tok-")
	if !ok || oid == "" {
		return ask.Identity{}, errors.New("bad token")
	}
	return ask.Identity{OID: oid, Token: raw, Scopes: []string{"das"}}, nil
}

// hosts serves each request in process (memnet) with the handler for its host.
type hosts map[string]http.Handler

func (h hosts) RoundTrip(r *http.Request) (*http.Response, error) {
	next, ok := h[r.URL.Host]
	if !ok {
		return nil, errors.New("no such host")
	}
	return memnet.Transport{Handler: next}.RoundTrip(r)
}

// sessionCount counts the MCP sessions its handler opened (their ids, from the answers to
// initialize) and those ended by a DELETE.
type sessionCount struct {
	next    http.Handler
	mu      sync.Mutex
	ids     map[string]bool
	deleted map[string]bool
}

func (c *sessionCount) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("Mcp-Session-Id")
	c.next.ServeHTTP(w, r)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids, c.deleted = map[string]bool{}, map[string]bool{}
	}
	switch {
	case r.Method == http.MethodPost && id == "":
		if id := w.Header().Get("Mcp-Session-Id"); id != "" {
			c.ids[id] = true
		}
	case r.Method == http.MethodDelete:
		c.deleted[id] = true
	}
}

func (c *sessionCount) opened() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ids)
}

// open is how many opened sessions were not DELETEd.
func (c *sessionCount) open() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for id := range c.ids {
		if !c.deleted[id] {
			n++
		}
	}
	return n
}

// The same over real sockets, against an HTTP server that takes each connection and never
// answers: once the runs are cancelled, all but MaxLingeringHandshakes of them return without
// waiting for the tool timeout, and the server sees those connections go (the cancelled
// handshakes send nothing more); the lingering ones end when the server lets them.
func TestEndedRunsHandshakesAtAHungServer(t *testing.T) {
	const runs, slots = 8, 2
	arrived := make(chan struct{}, runs)
	left := make(chan struct{}, runs)
	stop := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			left <- struct{}{}
		case <-stop:
		}
	}))
	t.Cleanup(silent.Close)
	var once sync.Once
	release := func() { once.Do(func() { close(stop) }) }
	t.Cleanup(release) // before the server's Close (cleanups run last first)
	a, err := agent.New(agent.Options{
		Model:                  &scripted{script: []func(model.Request) (model.Response, error){say("must not be asked")}},
		Sources:                []agent.SourceConfig{{Name: "silent", URL: silent.URL + "/mcp"}},
		ToolTimeout:            time.Minute,
		HandshakeLinger:        time.Minute, // the lingering ones end when the server lets them
		MaxLingeringHandshakes: slots,
	})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan ask.Outcome, runs)
	ctx, cancel := context.WithCancel(t.Context())
	for range runs {
		go func() { ended <- a.Run(ctx, hostileRequest("tok-alice"), &recorder{}) }()
	}
	within := func(what string, ch <-chan struct{}, n int) {
		t.Helper()
		for i := range n {
			select {
			case <-ch:
			case <-time.After(10 * time.Second): // a bound for the failure only
				t.Fatalf("%s: %d of %d within 10 s", what, i, n)
			}
		}
	}
	within("handshakes arrived", arrived, runs)
	cancel()
	returned := make(chan struct{}, runs)
	go func() {
		for range runs {
			if out := <-ended; out.Error == nil || out.Error.Kind != gen.ErrorKindCancelled {
				t.Errorf("outcome %s %+v, want error{cancelled}", outcomeType(out), out.Error)
			}
			returned <- struct{}{}
		}
	}()
	within("runs returned after the cancel, before the tool timeout", returned, runs-slots)
	within("connections the server saw go", left, runs-slots)
	select {
	case <-returned:
		t.Errorf("more than %d runs returned while their handshakes should linger", runs-slots)
	default:
	}
	release()
	within("lingering runs returned once the server let them go", returned, slots)
}
