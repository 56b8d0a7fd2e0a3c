package hardening_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/stack"
)

// A reply the model could not finish — the output cap (ASK_LLM_MAX_TOKENS) cut it, as the
// llm-stub cuts it like the real API, finish_reason "length" — is the model failing, not its
// answer: the run ends in error{model} saying so, at once, with no further model call. It used
// to be taken as a finished turn: the definition question answered with half a sentence, the
// churn question abstained with a cut clarification, and a tool call whose arguments the cap
// cut went back to the model as its mistake (which then apologised, in an "answer").
func TestModelReplyCutAtTheOutputCap(t *testing.T) {
	// 20 tokens: every tool call of these questions fits but run_query's; no final prose does.
	s, _ := startStack(t, stack.Options{Deadline: faultDeadline, Model: &agent.Config{
		LLM: agent.LLMStub, MaxTokens: 20, MaxModelCalls: 12,
	}})
	for _, c := range []struct {
		name, q string
		calls   int // model calls, the cut one last
	}{
		{"final prose of an answer", qCFR, 3},
		{"final prose of an abstention", qChurn, 2},
		{"a tool call's arguments", qSev1, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := stubCalls(s)
			term := runFault(t, s, c.q)
			if term.Type != "error" || term.Kind != "model" || !strings.Contains(term.Message, "output token cap") {
				t.Errorf("%s/%s %q, want error/model naming the output token cap", term.Type, term.Kind, term.Message)
			}
			if n := stubCalls(s) - before; n != c.calls {
				t.Errorf("%d model calls, want %d: none after the cut reply", n, c.calls)
			}
		})
	}
}

// A model call that gets no answer within ASK_LLM_TIMEOUT_S ends in error{model} saying that,
// not that the provider was unreachable or unreadable: it was reached, and said nothing. Both
// adapters: the OpenAI one against the llm-stub behind a proxy that holds the call, the
// Anthropic one against a server that sends the stream's first event and then nothing.
func TestModelCallTimeoutSaysSo(t *testing.T) {
	s := modelBehind(t, func(_ http.ResponseWriter, r *http.Request, _ []byte) bool {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			<-r.Context().Done() // the adapter gives up after its 1 s timeout
			return true
		}
		return false
	})
	if term := runFault(t, s, qSev1); term.Type != "error" || term.Kind != "model" || !strings.Contains(term.Message, "ASK_LLM_TIMEOUT_S") {
		t.Errorf("openai: %s/%s %q, want error/model naming the model call timeout", term.Type, term.Kind, term.Message)
	}
	modelErrorsSay(t, s, "openai", "timeout")

	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: "+anthropicStart+"\n\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(silent.Close)
	s, _ = startStack(t, stack.Options{Deadline: faultDeadline, AdminAddr: "127.0.0.1:0", Model: &agent.Config{
		LLM: agent.LLMAnthropic, BaseURL: silent.URL, APIKey: "sk-ant-k", Model: "claude-sonnet-4-5",
		Timeout: time.Second, MaxRetries: -1, MaxTokens: 1024, MaxModelCalls: 12,
	}})
	if term := runFault(t, s, qSev1); term.Type != "error" || term.Kind != "model" || !strings.Contains(term.Message, "ASK_LLM_TIMEOUT_S") {
		t.Errorf("anthropic: %s/%s %q, want error/model naming the model call timeout", term.Type, term.Kind, term.Message)
	}
	modelErrorsSay(t, s, "anthropic", "timeout")
}

// modelErrorsSay fails t unless s's /metrics counts model errors of provider under kind alone:
// an operator's alert on ask_model_errors_total{kind="timeout"} sees a call's own timeout.
func modelErrorsSay(t *testing.T, s *stack.Stack, provider, kind string) {
	t.Helper()
	a := newAPI(s.AdminURL)
	defer a.close()
	m := a.do(t.Context(), t, http.MethodGet, "/metrics", "", nil, nil)
	var counted []string
	for line := range strings.Lines(string(m.body)) {
		if strings.HasPrefix(line, "ask_model_errors_total{") && strings.Contains(line, `provider="`+provider+`"`) {
			counted = append(counted, strings.TrimSpace(line))
		}
	}
	want := `kind="` + kind + `"`
	if len(counted) != 1 || !strings.Contains(counted[0], want) {
		t.Errorf("/metrics (%d) counts %s's errors as %q, want one series with %s", m.status, provider, counted, want)
	}
}

// anthropicStart is a Messages stream's first event.
const anthropicStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":210,"output_tokens":1}}}`

// A cancel while a model call is in flight aborts that call: the provider sees its connection
// close at once (the llm-stub records 499 for a turn it was told to hold for an hour; an
// Anthropic stream that had sent its first event sees its request end), the log ends
// error{cancelled} then done, and no model call follows.
func TestCancelAbortsTheModelCallInFlight(t *testing.T) {
	script, err := llmstub.ParseScript([]byte(`
rules:
  - name: held
    pattern: 'sev1'
    steps:
      - tool: search_catalog
        args: {query: incident}
        delay: 1h
    final: "never"
`))
	if err != nil {
		t.Fatal(err)
	}
	stub, err := llmstub.New(llmstub.Options{Script: script})
	if err != nil {
		t.Fatal(err)
	}
	openaiSrv, openaiSeen := provider(t, stub.Handler())
	anthropicSrv, anthropicSeen := provider(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: "+anthropicStart+"\n\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	for _, c := range []struct {
		name string
		cfg  agent.Config
		srv  *httptest.Server
		seen *providerSeen
	}{
		{"openai", agent.Config{LLM: agent.LLMOpenAI, BaseURL: openaiSrv.URL + "/v1", APIKey: "k", Model: "stub"}, openaiSrv, openaiSeen},
		{"anthropic", agent.Config{LLM: agent.LLMAnthropic, BaseURL: anthropicSrv.URL, APIKey: "sk-ant-k", Model: "claude-sonnet-4-5"}, anthropicSrv, anthropicSeen},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Timeout, c.cfg.MaxTokens, c.cfg.MaxModelCalls = time.Hour, 1024, 12
			s, _ := startStack(t, stack.Options{Deadline: time.Hour, Model: &c.cfg})
			// Should the call not be aborted, the test still ends: its connection is cut
			// before the stack closes (which waits for the run).
			t.Cleanup(c.srv.CloseClientConnections)
			a := newAPI(s.AskURL)
			defer a.close()
			ctx := t.Context()
			tok := mint(t, s.IdP, idp.Claims{OID: "alice"})
			ticket := a.ask(ctx, t, tok, a.conversation(ctx, t, tok), qSev1)
			within(t, c.seen.arrived, "the model call to arrive")
			if r := a.do(ctx, t, http.MethodPost, "/v1/asks/"+ticket+"/cancel", tok, nil, nil); r.status != http.StatusAccepted {
				t.Fatalf("cancel: %d %s", r.status, r.body)
			}
			if term := checkLog(t, a.events(ctx, t, tok, ticket, ""), 1, false); term.Type != "error" || term.Kind != "cancelled" {
				t.Errorf("%s/%s, want error/cancelled", term.Type, term.Kind)
			}
			within(t, c.seen.ended, "the provider to see the call's connection close")
			if n := c.seen.calls.Load(); n != 1 {
				t.Errorf("%d model calls, want the one cancelled", n)
			}
		})
	}
	if reqs := stub.Requests(); len(reqs) != 1 || reqs[0].Status != llmstub.StatusClientClosed {
		t.Errorf("the llm-stub recorded %+v, want one request the client closed (499)", reqs)
	}
}

// providerSeen is what a model provider saw of its chat calls.
type providerSeen struct {
	calls          atomic.Int64
	arrived, ended chan struct{} // a value per call, when it arrives and when its handler returns
}

// provider serves h as a model provider on loopback, noting each model call's arrival and end.
func provider(t *testing.T, h http.Handler) (*httptest.Server, *providerSeen) {
	t.Helper()
	seen := &providerSeen{arrived: make(chan struct{}, 16), ended: make(chan struct{}, 16)}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		seen.calls.Add(1)
		defer func() { seen.ended <- struct{}{} }()
		// The call has arrived once its whole request has: a test that cancels on arrival
		// must not cut it while h still reads the body (the llm-stub would record a 400, not
		// the 499 of a call the client closed).
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		seen.arrived <- struct{}{}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs, seen
}

// within waits for a value on ch, failing t if none comes in ten seconds (a bound on a hang,
// not a measurement).
func within(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("waited ten seconds for %s", what)
	}
}

// A source (or the gateway in front of it) that answers 403 for this user — on the handshake,
// or on one tool call — is not a refusal: a refusal is a tool result marked ask/refusal, which
// names the tool and the reason (docs/sources.md §4). The run ends in error{transport} naming
// the status, with no model call after it, and the step of a refused call says what happened.
func TestSourceAnswering403(t *testing.T) {
	forbid := func(onlyCalls bool) fault {
		return func(w http.ResponseWriter, _ *http.Request, body []byte) bool {
			if onlyCalls && !isToolCall(body) {
				return false
			}
			http.Error(w, "forbidden for this user", http.StatusForbidden)
			return true
		}
	}
	for _, c := range []struct {
		name      string
		onlyCalls bool
		calls     int // model calls
	}{
		{"on the handshake", false, 0},
		{"on a tool call", true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := sourceBehind(t, forbid(c.onlyCalls))
			term := runFault(t, s, qSev1)
			if term.Type != "error" || term.Kind != "transport" || !strings.Contains(term.Message, "HTTP 403") {
				t.Errorf("%s/%s %q, want error/transport naming HTTP 403", term.Type, term.Kind, term.Message)
			}
			if n := stubCalls(s); n != c.calls {
				t.Errorf("%d model calls, want %d", n, c.calls)
			}
		})
	}
}

// A 429 whose Retry-After is longer than the adapter waits (20 s) ends the ask at once in
// error{model} "rate limited", after one request: it used to come back after 20 s, before the
// provider asked, to be refused again, and the user waited for nothing.
func TestRateLimitedForLongerThanTheAdapterWaits(t *testing.T) {
	var chats atomic.Int64
	s := modelBehindRetrying(t, time.Minute, 0, func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			return false
		}
		chats.Add(1)
		w.Header().Set("Retry-After", "3600")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"rate limited","type":"rate_limit_error"}}`)
		return true
	})
	start := time.Now()
	term := runFault(t, s, qSev1)
	if term.Type != "error" || term.Kind != "model" || !strings.Contains(term.Message, "rate limited") {
		t.Errorf("%s/%s %q, want error/model rate limited", term.Type, term.Kind, term.Message)
	}
	if n := chats.Load(); n != 1 {
		t.Errorf("%d requests to the provider in %s, want 1: none before its Retry-After", n, time.Since(start).Round(time.Second))
	}
}

// A cancel while a tool call is in flight ends the log at once — error{cancelled}, done, no
// step for that call — while the call itself completes at the source, as design.md promises
// (tools are read-only; the source audits it): its request is not aborted. Once it has, no
// model call follows.
func TestCancelWhileAToolCallIsInFlight(t *testing.T) {
	held, gone := make(chan struct{}, 1), make(chan struct{}, 1)
	release := make(chan struct{})
	// Registered first, so it runs last: after the stack's Close, which waits for every run.
	calls := -1
	var s *stack.Stack
	t.Cleanup(func() {
		if calls < 0 {
			return
		}
		if n := stubCalls(s); n != calls {
			t.Errorf("%d model calls after the cancelled tool call completed", n-calls)
		}
	})
	var p *faultProxy
	s, p = sourceBehind(t, func(_ http.ResponseWriter, r *http.Request, body []byte) bool {
		if isToolCall(body) && p.toolCalls.Load() == 1 {
			held <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				gone <- struct{}{}
			}
		}
		return false
	})
	a := newAPI(s.AskURL)
	defer a.close()
	ctx := t.Context()
	tok := mint(t, s.IdP, idp.Claims{OID: "alice"})
	ticket := a.ask(ctx, t, tok, a.conversation(ctx, t, tok), qSev1)
	within(t, held, "the first tool call to reach the source")
	if r := a.do(ctx, t, http.MethodPost, "/v1/asks/"+ticket+"/cancel", tok, nil, nil); r.status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	frames := a.events(ctx, t, tok, ticket, "")
	if term := checkLog(t, frames, 1, false); term.Type != "error" || term.Kind != "cancelled" {
		t.Errorf("%s/%s, want error/cancelled", term.Type, term.Kind)
	}
	for _, f := range frames {
		if f.typ == "step" {
			t.Errorf("a step in the log of an ask cancelled during its first tool call: %s", f.data)
		}
	}
	select {
	case <-gone:
		t.Fatal("the tool call in flight was aborted; design.md has it complete")
	default:
	}
	calls = stubCalls(s)
	close(release)
}

// A provider key the provider rejects (401, its body quoting the key as OpenAI's does): the ask
// ends in error{model} "authentication failed", and the operator's warning line says so too —
// it said only "rejected", which a bad key, an unknown model and a malformed request all are.
// The key is in no event and no log line.
func TestBadProviderKey(t *testing.T) {
	const key = "sk-bad-key-5e2a9c"
	reject := func(body string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, strings.ReplaceAll(body, "KEY", r.Header.Get("Authorization")+r.Header.Get("X-Api-Key")))
		})
	}
	openaiSrv, _ := provider(t, reject(`{"error":{"message":"Incorrect API key provided: KEY.","type":"invalid_request_error","code":"invalid_api_key"}}`))
	anthropicSrv, _ := provider(t, reject(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key KEY"}}`))
	for _, cfg := range []agent.Config{
		{LLM: agent.LLMOpenAI, BaseURL: openaiSrv.URL + "/v1", Model: "gpt-4o-mini"},
		{LLM: agent.LLMAnthropic, BaseURL: anthropicSrv.URL, Model: "claude-sonnet-4-5"},
	} {
		t.Run(cfg.LLM, func(t *testing.T) {
			cfg.APIKey, cfg.Timeout, cfg.MaxTokens, cfg.MaxModelCalls = key, time.Second, 1024, 12
			s, sink := startStack(t, stack.Options{Deadline: faultDeadline, Model: &cfg})
			a := newAPI(s.AskURL)
			defer a.close()
			ctx := t.Context()
			tok := mint(t, s.IdP, idp.Claims{OID: "alice"})
			ticket := a.ask(ctx, t, tok, a.conversation(ctx, t, tok), qSev1)
			frames := a.events(ctx, t, tok, ticket, "")
			if term := checkLog(t, frames, 1, false); term.Type != "error" || term.Kind != "model" || !strings.Contains(term.Message, "authentication failed") {
				t.Errorf("%s/%s %q, want error/model authentication failed", term.Type, term.Kind, term.Message)
			}
			w := &witness{}
			w.events(frames)
			assertClean(t, sink.String(), w, []string{key})
			if !slices.ContainsFunc(strings.Split(sink.String(), "\n"), func(l string) bool {
				return strings.Contains(l, `"msg":"model call failed"`) && strings.Contains(l, "authentication failed") && strings.Contains(l, `"status":401`)
			}) {
				t.Errorf("no warning line says the provider rejected the key (401, authentication failed)")
			}
		})
	}
}

// A model that never stops calling tools (the llm-stub scripted with more steps than the run
// allows) ends in error{model} at ASK_MAX_TURNS model calls, each of whose tool calls was made
// and reported, and nothing after.
func TestModelThatNeverStopsCallingTools(t *testing.T) {
	var b strings.Builder
	b.WriteString("rules:\n  - name: endless\n    pattern: 'sev1'\n    steps:\n")
	for range 40 {
		b.WriteString("      - tool: search_catalog\n        args: {query: incident}\n")
	}
	b.WriteString("    final: never\n")
	script, err := llmstub.ParseScript([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := startStack(t, stack.Options{Deadline: faultDeadline, StubScript: script, Model: &agent.Config{
		LLM: agent.LLMStub, MaxModelCalls: 5,
	}})
	a := newAPI(s.AskURL)
	defer a.close()
	ctx := t.Context()
	tok := mint(t, s.IdP, idp.Claims{OID: "alice"})
	ticket := a.ask(ctx, t, tok, a.conversation(ctx, t, tok), qSev1)
	frames := a.events(ctx, t, tok, ticket, "")
	term := checkLog(t, frames, 1, false)
	if term.Type != "error" || term.Kind != "model" || !strings.Contains(term.Message, "did not finish in 5 calls") {
		t.Errorf("%s/%s %q, want error/model: too many turns", term.Type, term.Kind, term.Message)
	}
	steps := 0
	for _, f := range frames {
		if f.typ == "step" {
			steps++
		}
	}
	if n := stubCalls(s); n != 5 || steps != 5 || frames[len(frames)-1].env(t).Steps != 5 {
		t.Errorf("%d model calls and %d steps, want 5 of each", n, steps)
	}
}

// A model provider (or a gateway at ASK_LLM_BASE_URL) that redirects the call to another origin
// is not followed: a 307 would re-send the whole request there — the conversation, the question
// in it, and Anthropic's x-api-key, which Go's client does not strip as it does Authorization.
// The run ends in error{model} saying why, and the other origin receives nothing.
func TestModelRedirectOffOrigin(t *testing.T) {
	foreign, foreignSeen := provider(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "nothing here", http.StatusNotFound)
	}))
	redirect := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, foreign.URL+r.URL.Path, http.StatusTemporaryRedirect)
	})
	openaiSrv, _ := provider(t, redirect)
	anthropicSrv, _ := provider(t, redirect)
	for _, cfg := range []agent.Config{
		{LLM: agent.LLMOpenAI, BaseURL: openaiSrv.URL + "/v1", Model: "gpt-4o-mini"},
		{LLM: agent.LLMAnthropic, BaseURL: anthropicSrv.URL, Model: "claude-sonnet-4-5"},
	} {
		t.Run(cfg.LLM, func(t *testing.T) {
			cfg.APIKey, cfg.Timeout, cfg.MaxTokens, cfg.MaxModelCalls = "sk-redirected", time.Second, 1024, 12
			s, _ := startStack(t, stack.Options{Deadline: faultDeadline, Model: &cfg})
			term := runFault(t, s, qSev1)
			if term.Type != "error" || term.Kind != "model" || !strings.Contains(term.Message, "redirected off its configured origin") {
				t.Errorf("%s/%s %q, want error/model: redirected off its origin", term.Type, term.Kind, term.Message)
			}
		})
	}
	if n := foreignSeen.calls.Load(); n != 0 {
		t.Errorf("the other origin received %d model calls", n)
	}
}
