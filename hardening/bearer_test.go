package hardening_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/internal/hostile"
	"github.com/das-ask/ask/internal/logtest"
)

// The caller's bearer goes to the configured source's origin and nowhere else, through the
// whole service: an ask answered normally, then one whose source (behind a proxy standing for
// anything in front of it) answers its tool call with 307 to another host. The second ends in
// error{transport} naming the redirect; the other host receives nothing at all; the model
// provider never receives the bearer (in a header or in a prompt); and no log line, response
// or event but accepted holds the question or the token.
func TestBearerGoesOnlyToConfiguredSources(t *testing.T) {
	foreign := hostile.NewForeign(t)
	var redirect atomic.Bool
	src := newFaultProxy(t)
	src.set(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if redirect.Load() && isToolCall(body) {
			http.Redirect(w, r, foreign.URL+"/mcp", http.StatusTemporaryRedirect)
			return true
		}
		return false
	})
	stub, err := llmstub.New(llmstub.Options{})
	if err != nil {
		t.Fatal(err)
	}
	stubSrv := httptest.NewServer(stub.Handler())
	t.Cleanup(stubSrv.Close)
	provider := newFaultProxy(t)
	provider.setTarget(t, stubSrv.URL)
	var seenByProvider atomic.Pointer[string]
	provider.set(func(_ http.ResponseWriter, r *http.Request, body []byte) bool {
		var b strings.Builder
		for k, vs := range r.Header {
			b.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
		}
		b.Write(body)
		all := b.String()
		if prev := seenByProvider.Load(); prev != nil {
			all = *prev + all
		}
		seenByProvider.Store(&all)
		return false
	})

	sink := &logtest.Buffer{}
	s, _ := startStack(t, stack.Options{
		Logger:  slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Sources: []agent.SourceConfig{{Name: "demo", URL: src.srv.URL + "/mcp"}},
		Model: &agent.Config{LLM: agent.LLMOpenAI, BaseURL: provider.srv.URL + "/v1", APIKey: "sk-provider-key-77aa", Model: "stub",
			Timeout: 10 * time.Second, MaxRetries: 1, MaxTurns: 8, MaxTokens: 256},
		AdminAddr: "127.0.0.1:0",
	})
	t.Cleanup(src.releaseAll)
	t.Cleanup(provider.releaseAll)
	src.setTarget(t, s.SourceURL)

	a := newAPI(s.AskURL)
	defer a.close()
	ctx := t.Context()
	w := &witness{}
	tok := mint(t, s.IdP, idp.Claims{OID: "alice"})
	cid := a.conversation(ctx, t, tok)

	ticket := a.ask(ctx, t, tok, cid, qSev1)
	frames := a.events(ctx, t, tok, ticket, "")
	if term := checkLog(t, frames, 1, false); term.Type != "answer" {
		t.Fatalf("ask through an honest source: %s, want answer", term.Type)
	}
	w.events(frames)

	redirect.Store(true)
	ticket = a.ask(ctx, t, tok, cid, qSev1)
	frames = a.events(ctx, t, tok, ticket, "")
	term := checkLog(t, frames, 1, false)
	if term.Type != "error" || term.Kind != "transport" {
		t.Fatalf("ask through a redirecting source: %s/%s, want error/transport", term.Type, term.Kind)
	}
	if last := frames[len(frames)-2].data; !strings.Contains(last, "redirected off its configured origin") {
		t.Errorf("terminal event %s, want it to name the refused redirect", last)
	}
	w.events(frames)
	w.response(a.do(ctx, t, http.MethodGet, "/v1/asks/"+ticket, tok, nil, nil))

	if n := len(foreign.Requests()); n != 0 {
		t.Errorf("the other host received %d requests", n)
	}
	seen := seenByProvider.Load()
	if seen == nil || !strings.Contains(*seen, "sk-provider-key-77aa") {
		t.Fatal("the provider saw nothing (or not its own key): the check would prove nothing")
	}
	for _, secret := range tokenSecrets(tok) {
		if strings.Contains(*seen, secret) {
			t.Errorf("the model provider received the caller's bearer")
		}
	}
	if bytes.Contains([]byte(*seen), []byte("Bearer "+tok)) {
		t.Errorf("the model provider received the caller's Authorization header")
	}
	assertClean(t, sink.String(), w, append([]string{qSev1, "sk-provider-key-77aa"}, tokenSecrets(tok)...))
}
