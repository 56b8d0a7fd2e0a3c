package hardening_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// switchableIdP serves an IdP's JWKS, or 503 while it is down.
type switchableIdP struct {
	*idp.IdP
	down    atomic.Bool
	fetches atomic.Int64
	srv     *httptest.Server
}

func newSwitchableIdP(t testing.TB) *switchableIdP {
	t.Helper()
	s := &switchableIdP{}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		if s.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		s.IdP.Handler().ServeHTTP(w, r)
	}))
	p, err := idp.New(idp.Options{Issuer: "http://" + s.srv.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	s.IdP = p
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

// gatedRunner answers once its gate is open, counting runs.
type gatedRunner struct {
	gate chan struct{}
	runs atomic.Int64
}

func (g *gatedRunner) Run(ctx context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome {
	g.runs.Add(1)
	select {
	case <-g.gate:
	case <-ctx.Done():
	}
	return ask.Outcome{Answer: &gen.AnswerBody{Text: "ok", Path: gen.AnswerPath{Speed: gen.AnswerPathSpeedFast}}}
}

// serveService starts a service with auth and runner on a loopback server, shut down when t ends.
func serveService(t testing.TB, authn ask.Authenticator, runner ask.Runner) *api {
	t.Helper()
	return serveServiceWith(t, server.Options{Authenticator: authn, Runner: runner})
}

// serveServiceWith starts a service with opts on a loopback server, shut down when t ends.
func serveServiceWith(t testing.TB, opts server.Options) *api {
	t.Helper()
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	a := newAPI(hs.URL + server.DefaultBasePath)
	t.Cleanup(func() {
		a.close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		hs.Close()
	})
	return a
}

// The JWKS endpoint down at start: no bearer can be checked, so every one is answered 503 with
// Retry-After and a detail that says no keys are known (the service is not ready; the token
// may well be good, so no 401 tells the client to drop it), and nothing runs. Once it is up,
// the same token works without a restart.
// Down again mid-run: the run finishes, and tokens signed by cached keys keep working; a token
// from a key rotated in while it is down is refused as unknown, and accepted once it is back.
func TestJWKSDownAtStartAndMidRun(t *testing.T) {
	p := newSwitchableIdP(t)
	p.down.Store(true)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	v, err := auth.New(ctx, auth.Config{JWKSURL: p.JWKSURL(), Issuer: p.Issuer(), Audience: "das", RequiredScope: "das"}, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Ready() {
		t.Fatal("validator ready with the JWKS down")
	}
	runner := &gatedRunner{gate: make(chan struct{})}
	a := serveService(t, v, runner)
	alice := mint(t, p.IdP, idp.Claims{OID: "alice"})

	r := a.do(ctx, t, http.MethodPost, "/v1/conversations", alice, []byte(`{}`), nil)
	problem(t, r, http.StatusServiceUnavailable)
	if !strings.Contains(string(r.body), "signing keys have not loaded") {
		t.Errorf("503 with no keys cached: %s, want it to say no keys have loaded", r.body)
	}
	if r.header.Get("Retry-After") == "" || r.header.Get("WWW-Authenticate") != "" {
		t.Errorf("503 with no keys cached: Retry-After %q, WWW-Authenticate %q; want a Retry-After and no challenge",
			r.header.Get("Retry-After"), r.header.Get("WWW-Authenticate"))
	}

	p.down.Store(false)
	cid := a.conversation(ctx, t, alice) // the unknown kid triggers a refetch
	ticket := a.ask(ctx, t, alice, cid, "q")

	p.down.Store(true)
	before := p.fetches.Load()
	close(runner.gate) // the run finishes while the JWKS is down
	if st := a.finish(ctx, t, alice, ticket, 20*time.Second); st.State != gen.AskStateAnswer {
		t.Fatalf("run while the JWKS is down: %s", st.State)
	}
	again := mint(t, p.IdP, idp.Claims{OID: "alice"}) // same key, new token
	a.conversation(ctx, t, again)
	if got := p.fetches.Load(); got != before {
		t.Errorf("cached keys caused %d JWKS fetches", got-before)
	}

	if err := p.Rotate(idp.RS256); err != nil {
		t.Fatal(err)
	}
	rotated := mint(t, p.IdP, idp.Claims{OID: "alice"})
	r = a.do(ctx, t, http.MethodPost, "/v1/conversations", rotated, []byte(`{}`), nil)
	problem(t, r, http.StatusUnauthorized)
	if ch := r.header.Get("WWW-Authenticate"); !strings.Contains(ch, "signing key is unknown") {
		t.Errorf("challenge for a key the JWKS could not be refetched for: %q", ch)
	}
	p.down.Store(false)
	a.conversation(ctx, t, rotated)
	if got := runner.runs.Load(); got != 1 {
		t.Errorf("%d runs, want 1 (refused requests must run nothing)", got)
	}
}
