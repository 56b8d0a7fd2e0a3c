//go:build !fuzzsmoke

package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/server"
)

// realStack is the ask service over real HTTP, validating real tokens from an in-process
// identity provider, with every log line of the service, the validator and the IdP captured
// at debug level.
type realStack struct {
	idp  *idp.IdP
	url  string // the API base, with the base path
	logs *logtest.Buffer
	srv  *server.Server
}

// stackOption varies newRealStack's stack.
type stackOption func(*stackOptions)

type stackOptions struct {
	idpFront func(http.Handler) http.Handler
}

// idpFront puts front before the IdP's handler, so that a test can make the IdP misbehave
// (be down, say) while the validator keeps the IdP's URLs.
func idpFront(front func(http.Handler) http.Handler) stackOption {
	return func(o *stackOptions) { o.idpFront = front }
}

func newRealStack(t *testing.T, runner ask.Runner, opts ...stackOption) *realStack {
	t.Helper()
	var o stackOptions
	for _, opt := range opts {
		opt(&o)
	}
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	idpSrv := httptest.NewUnstartedServer(nil)
	p, err := idp.New(idp.Options{Issuer: "http://" + idpSrv.Listener.Addr().String(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	idpSrv.Config.Handler = p.Handler()
	if o.idpFront != nil {
		idpSrv.Config.Handler = o.idpFront(idpSrv.Config.Handler)
	}
	idpSrv.Start()
	t.Cleanup(idpSrv.Close)

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	v, err := auth.New(ctx, auth.Config{
		JWKSURL: p.JWKSURL(), Issuer: p.Issuer(), Audience: "das", RequiredScope: "das",
		Algorithms: []string{"RS256", "ES256"}, Leeway: time.Second,
	}, auth.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{Runner: runner, Authenticator: v, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	askSrv := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		askSrv.Close()
	})
	return &realStack{idp: p, url: askSrv.URL + "/ask", logs: logs, srv: srv}
}

func (s *realStack) mint(t *testing.T, c idp.Claims) string {
	t.Helper()
	tok, err := s.idp.Mint(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestEndToEnd drives the real Echo server over HTTP with the generated client and real
// tokens: a conversation of two asks (the second sees the first), the stream, status, cancel,
// ownership and every 401. Afterwards no log line holds a question or a token.
func TestEndToEnd(t *testing.T) {
	questions := []string{"Which team had the most incidents in 2026-Q3?", "How many deployments did that team ship in 2026-Q3?"}
	runner := ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseQuerying, Subject: "incidents", Source: "demo"})
		emit.ModelCall(ask.Usage{InputTokens: 100, OutputTokens: 20})
		emit.Step(step(0))
		if strings.HasPrefix(req.Question, "How many") {
			if len(req.History) != 1 || req.History[0].Question != questions[0] {
				return ask.Outcome{Error: &gen.ErrorBody{Kind: gen.ErrorKindModel, Message: "no history"}}
			}
			return ask.Outcome{Answer: answer("Payments shipped 31.")}
		}
		if req.Question == "wait for cancel" {
			<-ctx.Done()
			return ask.Outcome{}
		}
		return ask.Outcome{Answer: answer("Payments.")}
	})
	s := newRealStack(t, runner)
	aliceTok := s.mint(t, idp.Claims{OID: "alice"})
	bobTok := s.mint(t, idp.Claims{OID: "bob", Alg: "ES256"})
	ctx := t.Context()

	cw, err := gen.NewClientWithResponses(s.url, gen.WithRequestEditorFn(bearer(aliceTok)))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := gen.NewClient(s.url, gen.WithRequestEditorFn(bearer(aliceTok)))
	if err != nil {
		t.Fatal(err)
	}

	conv, err := cw.CreateConversationWithResponse(ctx, nil, gen.CreateConversationRequest{})
	if err != nil || conv.JSON201 == nil {
		t.Fatalf("create conversation: %v %s", err, conv.Body)
	}
	cid := conv.JSON201.Id
	var tickets []string
	for _, q := range questions {
		r, err := cw.CreateAskWithResponse(ctx, cid, nil, gen.AskRequest{Question: q})
		if err != nil || r.JSON202 == nil {
			t.Fatalf("ask: %v %s", err, r.Body)
		}
		tickets = append(tickets, r.JSON202.Ticket)

		resp, err := raw.StreamEvents(ctx, r.JSON202.Ticket, &gen.StreamEventsParams{})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		frames := readAll(t, resp.Body)
		_ = resp.Body.Close()
		_, done := checkLifecycle(t, frames, gen.EventTypeAnswer)
		if done.Steps != 1 || done.Model != 1 || done.In != 100 || done.Out != 20 {
			t.Errorf("done: %+v", done)
		}
	}
	st, err := cw.GetAskWithResponse(ctx, tickets[1], &gen.GetAskParams{})
	if err != nil || st.JSON200 == nil || st.JSON200.State != gen.AskStateAnswer {
		t.Fatalf("status: %v %s", err, st.Body)
	}
	term, err := st.JSON200.Terminal.AsAnswerEvent()
	if err != nil || term.Text != "Payments shipped 31." {
		t.Errorf("second answer %q (%v): the conversation's history did not reach the runner", term.Text, err)
	}

	// Cancel over HTTP, twice.
	r, err := cw.CreateAskWithResponse(ctx, cid, nil, gen.AskRequest{Question: "wait for cancel"})
	if err != nil || r.JSON202 == nil {
		t.Fatalf("ask: %v %s", err, r.Body)
	}
	for range 2 {
		c, err := cw.CancelAskWithResponse(ctx, r.JSON202.Ticket)
		if err != nil || c.StatusCode() != http.StatusAccepted || c.JSON202.State != gen.AskStateError {
			t.Fatalf("cancel: %v %s", err, c.Body)
		}
	}

	// bob, with a real token, sees nothing of alice's.
	bw, _ := gen.NewClientWithResponses(s.url, gen.WithRequestEditorFn(bearer(bobTok)))
	if g, _ := bw.GetAskWithResponse(ctx, tickets[0], &gen.GetAskParams{}); g.StatusCode() != http.StatusNotFound {
		t.Errorf("bob reading alice's ticket: %d", g.StatusCode())
	}
	if a, _ := bw.CreateAskWithResponse(ctx, cid, nil, gen.AskRequest{Question: "bob's"}); a.StatusCode() != http.StatusNotFound {
		t.Errorf("bob asking in alice's conversation: %d", a.StatusCode())
	}

	// Every kind of bad bearer is a 401 problem+json with a challenge.
	forged, err := s.idp.Forge(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"none":           "",
		"garbage":        "not-a-jwt",
		"forged":         forged,
		"expired":        s.mint(t, idp.Claims{OID: "alice", Expired: true}),
		"wrong audience": s.mint(t, idp.Claims{OID: "alice", Audience: "someone-else"}),
		"missing scope":  s.mint(t, idp.Claims{OID: "alice", Scope: "other"}),
		"not yet valid":  s.mint(t, idp.Claims{OID: "alice", NotBefore: time.Now().Add(time.Hour)}),
	}
	for name, tok := range bad {
		c, _ := gen.NewClientWithResponses(s.url, gen.WithRequestEditorFn(bearer(tok)))
		resps := []struct {
			code   int
			header http.Header
			body   []byte
		}{}
		if r, err := c.CreateConversationWithResponse(ctx, nil, gen.CreateConversationRequest{}); err == nil {
			resps = append(resps, struct {
				code   int
				header http.Header
				body   []byte
			}{r.StatusCode(), r.HTTPResponse.Header, r.Body})
		}
		if r, err := c.GetAskWithResponse(ctx, tickets[0], &gen.GetAskParams{}); err == nil {
			resps = append(resps, struct {
				code   int
				header http.Header
				body   []byte
			}{r.StatusCode(), r.HTTPResponse.Header, r.Body})
		}
		if len(resps) != 2 {
			t.Fatalf("%s: requests failed", name)
		}
		for _, r := range resps {
			problemOf(t, r.code, r.header.Get("Content-Type"), r.body, http.StatusUnauthorized)
			if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s: WWW-Authenticate %q", name, r.header.Get("WWW-Authenticate"))
			}
		}
	}

	// The schema is published at the base path, without a bearer.
	resp, err := http.Get(s.url + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || doc["openapi"] == nil {
		t.Errorf("openapi.json: %v", err)
	}
	_ = resp.Body.Close()

	logs := s.logs.String()
	secrets := append([]string{aliceTok, bobTok, forged, "wait for cancel"}, questions...)
	for _, tok := range bad {
		if tok != "" {
			secrets = append(secrets, tok)
		}
	}
	s.logs.AssertAbsent(t, secrets...)
	if !strings.Contains(logs, `"level":"DEBUG"`) && !strings.Contains(logs, `"level":"INFO"`) {
		t.Errorf("nothing was logged: the log capture is not wired")
	}
}

// TestStreamOverHTTP: over a real HTTP connection a stream opens with a comment and retry,
// resumes after Last-Event-ID and ends after done. (Timing is covered in synctest; this is the wire.)
func TestStreamOverHTTP(t *testing.T) {
	s := newRealStack(t, answerRunner(3))
	tok := s.mint(t, idp.Claims{OID: "carol"})
	raw, _ := gen.NewClient(s.url, gen.WithRequestEditorFn(bearer(tok)))
	ctx := t.Context()
	cresp, err := raw.CreateConversation(ctx, nil, gen.CreateConversationRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var conv gen.Conversation
	_ = json.NewDecoder(cresp.Body).Decode(&conv)
	_ = cresp.Body.Close()
	aresp, err := raw.CreateAsk(ctx, conv.Id, nil, gen.AskRequest{Question: "stream it"})
	if err != nil {
		t.Fatal(err)
	}
	var tk gen.Ticket
	_ = json.NewDecoder(aresp.Body).Decode(&tk)
	_ = aresp.Body.Close()

	// The cursor must not be beyond the last seq: wait for the run to end first.
	wait := "wait=10"
	if sresp, err := raw.GetAsk(ctx, tk.Ticket, &gen.GetAskParams{Prefer: &wait}); err != nil {
		t.Fatal(err)
	} else {
		_ = sresp.Body.Close()
	}
	id := "3"
	resp, err := raw.StreamEvents(ctx, tk.Ticket, &gen.StreamEventsParams{LastEventID: &id})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	first, err := readFrame(br)
	if err != nil || first.Comment == "" || first.Retry == "" {
		t.Fatalf("first frame %+v, %v", first, err)
	}
	frames := readAll(t, br)
	if len(frames) == 0 || frames[0].ID != 4 || frames[len(frames)-1].Event != "done" {
		t.Fatalf("resumed stream: %v", types(frames))
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Errorf("stream did not close cleanly: %v", err)
	}
}

// TestTicketOneWrite: the 202 goes out with its length, not chunked, so that head and body
// leave in one write and no terminating chunk follows; the body is still the whole ticket.
func TestTicketOneWrite(t *testing.T) {
	s := newRealStack(t, ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		return ask.Outcome{Answer: answer("42")}
	}))
	tok := s.mint(t, idp.Claims{OID: "alice"})
	cw, err := gen.NewClientWithResponses(s.url, gen.WithRequestEditorFn(bearer(tok)))
	if err != nil {
		t.Fatal(err)
	}
	conv, err := cw.CreateConversationWithResponse(t.Context(), nil, gen.CreateConversationRequest{})
	if err != nil || conv.JSON201 == nil {
		t.Fatalf("create conversation: %v", err)
	}
	r, err := cw.CreateAskWithResponse(t.Context(), conv.JSON201.Id, nil, gen.AskRequest{Question: "How many?"})
	if err != nil || r.JSON202 == nil {
		t.Fatalf("ask: %v %s", err, r.Body)
	}
	if len(r.HTTPResponse.TransferEncoding) != 0 || r.HTTPResponse.ContentLength != int64(len(r.Body)) {
		t.Errorf("202: transfer encoding %v, content length %d, body %d bytes", r.HTTPResponse.TransferEncoding, r.HTTPResponse.ContentLength, len(r.Body))
	}
	if ct := r.HTTPResponse.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("202: content type %q", ct)
	}
	if loc := r.HTTPResponse.Header.Get("Location"); r.JSON202.StatusUrl != loc || r.JSON202.EventsUrl != loc+"/events" || !strings.HasSuffix(loc, "/v1/asks/"+r.JSON202.Ticket) {
		t.Errorf("202: %+v", r.JSON202)
	}

	// A keyed create's first answer goes out as its replay does: with its length. It was
	// chunked (flushed before the run started, with no length), its replay not.
	oneWrite := func(what string, resp *http.Response, body []byte) {
		t.Helper()
		if len(resp.TransferEncoding) != 0 || resp.ContentLength != int64(len(body)) {
			t.Errorf("%s: transfer encoding %v, content length %d, body %d bytes", what, resp.TransferEncoding, resp.ContentLength, len(body))
		}
	}
	for _, attempt := range []string{"first", "replay"} {
		kc, err := cw.CreateConversationWithResponse(t.Context(), &gen.CreateConversationParams{IdempotencyKey: new("conv-1")}, gen.CreateConversationRequest{})
		if err != nil || kc.JSON201 == nil {
			t.Fatalf("keyed conversation: %v", err)
		}
		oneWrite("keyed 201, "+attempt, kc.HTTPResponse, kc.Body)
		ka, err := cw.CreateAskWithResponse(t.Context(), kc.JSON201.Id, &gen.CreateAskParams{IdempotencyKey: new("ask-1")}, gen.AskRequest{Question: "How many?"})
		if err != nil || ka.JSON202 == nil {
			t.Fatalf("keyed ask: %v %s", err, ka.Body)
		}
		oneWrite("keyed 202, "+attempt, ka.HTTPResponse, ka.Body)
	}
}

// TestKeysNotLoaded: while the validator has never loaded its issuer's JWKS (the IdP is down),
// a bearer cannot be checked at all, which says nothing against it: the service answers 503
// problem+json with Retry-After, so a client retries with the same token, not 401
// invalid_token, which tells it the token is bad (the contract's 401 is "no bearer, or one
// that is not valid"). A request without a bearer, or with one that is not a JWT, is still a
// 401. Once the JWKS loads, the same token is admitted.
func TestKeysNotLoaded(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	s := newRealStack(t, ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome {
		return ask.Outcome{Answer: answer("ok")}
	}), idpFront(func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if down.Load() {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		})
	}))
	tok := s.mint(t, idp.Claims{OID: "alice"})
	post := func(tok string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.url+"/v1/conversations", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}

	resp, body := post(tok)
	problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), body, http.StatusServiceUnavailable)
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("503 with Retry-After %q, want whole seconds", resp.Header.Get("Retry-After"))
	}
	if c := resp.Header.Get("WWW-Authenticate"); c != "" {
		t.Errorf("503 challenges the bearer: WWW-Authenticate %q", c)
	}
	for name, bad := range map[string]string{"no bearer": "", "not a JWT": "not-a-jwt"} {
		resp, body := post(bad)
		problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), body, http.StatusUnauthorized)
		if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
			t.Errorf("%s: WWW-Authenticate %q", name, resp.Header.Get("WWW-Authenticate"))
		}
	}

	down.Store(false)
	if resp, body := post(tok); resp.StatusCode != http.StatusCreated {
		t.Errorf("once the JWKS is up: %d %s", resp.StatusCode, body)
	}
	s.logs.AssertAbsent(t, tok)
}
