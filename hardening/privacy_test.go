package hardening_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/internal/loopback"
)

// canary is in every question this test makes up, so any trace of a question is found.
const canary = "zq-canary-7f3a"

// witness records everything a user or an operator can see apart from the accepted event:
// every response body and header, every event but accepted.
type witness struct {
	seen []string
}

func (w *witness) response(r response) {
	w.seen = append(w.seen, string(r.body))
	for k, vs := range r.header {
		w.seen = append(w.seen, k+": "+strings.Join(vs, ","))
	}
}

func (w *witness) events(frames []frame) {
	for _, f := range frames {
		if f.typ != "accepted" {
			w.seen = append(w.seen, f.data)
		}
	}
}

// assertClean fails if any secret appears in any log line or anything witnessed.
func assertClean(t *testing.T, logs string, w *witness, secrets []string) {
	t.Helper()
	lines := strings.Split(logs, "\n")
	if len(lines) < 10 || !strings.Contains(logs, `"level":"DEBUG"`) {
		t.Fatalf("only %d log lines, or none at debug level: is the logger wired?", len(lines))
	}
	for _, s := range secrets {
		for i, l := range lines {
			if strings.Contains(l, s) {
				t.Errorf("log line %d carries a secret (%.24q…): %.300s", i, s, l)
			}
		}
		for _, x := range w.seen {
			if strings.Contains(x, s) {
				t.Errorf("a response or event carries a secret (%.24q…): %.300s", s, x)
			}
		}
	}
}

// tokenSecrets are a token and its signature (which alone would identify it).
func tokenSecrets(tok string) []string {
	parts := strings.Split(tok, ".")
	return []string{tok, parts[len(parts)-1]}
}

// Every path — answer, follow-up, catalog-only, refusal, abstention, cancel, conflict, invalid
// and oversized bodies, hostile and expired tokens, a source down, a model failing — with every
// component logging at debug level: no question text and no bearer appears in any log line, in
// any response (problem bodies and headers included), in any metric or label the service
// exports (instrumented as askd is), or in any event but accepted.
func TestNoQuestionOrTokenLeaks(t *testing.T) {
	s, sink := startStack(t, stack.Options{AdminAddr: "127.0.0.1:0"}) // instrumented as askd is
	a := newAPI(s.AskURL)
	defer a.close()
	ctx := t.Context()
	w := &witness{}
	alice := mint(t, s.IdP, idp.Claims{OID: "alice"})
	bob := mint(t, s.IdP, idp.Claims{OID: "bob", Alg: idp.ES256})
	expired := mint(t, s.IdP, idp.Claims{OID: "alice", Expired: true})
	forged, err := s.IdP.Forge(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	made := canary + " what is the zorblax rate of team Mobile?"
	questions := []string{qSev1, qTopTeam, qFollowUp, qCFR, qOncall, qChurn, qSlowSev1, made}

	run := func(tok, cid, q string) string {
		t.Helper()
		r := a.askRaw(ctx, t, tok, cid, q)
		w.response(r)
		var tk struct{ Ticket string }
		if r.status != http.StatusAccepted || json.Unmarshal(r.body, &tk) != nil {
			t.Fatalf("ask: %d %s", r.status, r.body)
		}
		frames := a.events(ctx, t, tok, tk.Ticket, "")
		checkLog(t, frames, 1, false)
		w.events(frames)
		return tk.Ticket
	}

	cid := a.conversation(ctx, t, alice)
	for _, q := range []string{qSev1, qTopTeam, qFollowUp, qCFR, qOncall, made} {
		run(alice, cid, q)
	}
	bc := a.conversation(ctx, t, bob)
	run(bob, bc, qOncall) // refusal
	run(bob, bc, qChurn)  // abstention

	// Cancel, and a conflicting second ask while the first runs.
	cc := a.conversation(ctx, t, alice)
	r := a.askRaw(ctx, t, alice, cc, qSlowSev1)
	w.response(r)
	var tk struct{ Ticket string }
	if err := json.Unmarshal(r.body, &tk); err != nil {
		t.Fatal(err)
	}
	w.response(a.askRaw(ctx, t, alice, cc, made)) // 409
	w.response(a.do(ctx, t, http.MethodPost, "/v1/asks/"+tk.Ticket+"/cancel", alice, nil, nil))
	w.events(a.events(ctx, t, alice, tk.Ticket, ""))
	w.response(a.do(ctx, t, http.MethodGet, "/v1/asks/"+tk.Ticket, alice, nil, nil))

	// Bodies the validator refuses, each carrying a question.
	for _, body := range []string{
		`{"question":"` + made + `","unknown":true}`,
		`{"question":"` + made + `"`,
		`{"question":"` + made + strings.Repeat("x", 5000) + `"}`,
		`{"question":"` + strings.Repeat(made, 3000) + `"}`, // over the body limit
		`{"question":["` + made + `"]}`,
	} {
		w.response(a.do(ctx, t, http.MethodPost, "/v1/conversations/"+cid+"/asks", alice, []byte(body), nil))
	}
	// Other people's and hostile tokens.
	for _, tok := range []string{expired, forged, alice + "x"} {
		w.response(a.do(ctx, t, http.MethodPost, "/v1/conversations/"+cid+"/asks", tok, []byte(`{"question":"`+made+`"}`), nil))
		w.response(a.do(ctx, t, http.MethodGet, "/v1/asks/"+tk.Ticket+"/events", tok, nil, nil))
	}
	w.response(a.do(ctx, t, http.MethodGet, "/v1/asks/"+tk.Ticket, bob, nil, nil))

	// Every metric, with every label, as a scraper would see it.
	metrics := newAPI(s.AdminURL)
	defer metrics.close()
	m := metrics.do(ctx, t, http.MethodGet, "/metrics", "", nil, nil)
	if m.status != http.StatusOK || !strings.Contains(string(m.body), "# TYPE") {
		t.Fatalf("/metrics: %d, %d bytes", m.status, len(m.body))
	}
	w.response(m)
	for _, oid := range []string{"alice", "bob"} {
		if strings.Contains(string(m.body), `="`+oid+`"`) {
			t.Errorf("a metric label names the identity %s", oid)
		}
	}

	secrets := append([]string{canary}, questions...)
	for _, tok := range []string{alice, bob, expired, forged} {
		secrets = append(secrets, tokenSecrets(tok)...)
	}
	assertClean(t, sink.String(), w, secrets)
}

// A provider whose error message quotes the request (some do, for a 400): the error event and
// the logs say the model refused the request, and never repeat what it quoted.
func TestModelErrorQuotingTheQuestionDoesNotLeak(t *testing.T) {
	made := canary + " how many sev1 incidents did we have in 2026-Q2?"
	stub, err := llmstub.New(llmstub.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(stub.Handler())
	t.Cleanup(hs.Close)
	p := newFaultProxy(t)
	p.setTarget(t, hs.URL)
	p.set(func(w http.ResponseWriter, r *http.Request, body []byte) bool {
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			return false
		}
		// Quote the last user message back, as a provider validating it might.
		var req struct {
			Messages []struct {
				Content any `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(body, &req)
		quoted, _ := json.Marshal(req.Messages)
		msg, _ := json.Marshal(map[string]any{"error": map[string]any{
			"message": "Invalid value for messages: " + string(quoted) + " auth=" + r.Header.Get("Authorization"),
			"type":    "invalid_request_error",
		}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write(msg)
		return true
	})
	sink := &logtest.Buffer{}
	s, _ := startStack(t, stack.Options{
		Logger: slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Model: &agent.Config{LLM: agent.LLMOpenAI, BaseURL: p.srv.URL + "/v1", APIKey: "sk-secret-key-9c1d", Model: "stub",
			Timeout: time.Second, MaxRetries: 1, MaxModelCalls: 4, MaxTokens: 64},
	})
	t.Cleanup(p.releaseAll)
	a := newAPI(s.AskURL)
	defer a.close()
	ctx := t.Context()
	w := &witness{}
	tok := mint(t, s.IdP, idp.Claims{OID: "alice"})
	cid := a.conversation(ctx, t, tok)
	ticket := a.ask(ctx, t, tok, cid, made)
	frames := a.events(ctx, t, tok, ticket, "")
	if term := checkLog(t, frames, 1, false); term.Type != "error" || term.Kind != "model" {
		t.Errorf("model 400: %s/%s, want error/model", term.Type, term.Kind)
	}
	w.events(frames)
	w.response(a.do(ctx, t, http.MethodGet, "/v1/asks/"+ticket, tok, nil, nil))
	assertClean(t, sink.String(), w, append([]string{canary, "sk-secret-key-9c1d"}, tokenSecrets(tok)...))
}

// The same with the Anthropic adapter: a gateway at ASK_LLM_BASE_URL that puts the request —
// the question, the key — into the error's type string as well as its message. The error event
// says "provider error" and nothing of what the gateway wrote.
func TestAnthropicErrorTypeQuotingTheQuestionDoesNotLeak(t *testing.T) {
	made := canary + " how many sev1 incidents did we have in 2026-Q2?"
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		echo := strings.ReplaceAll(string(body), `"`, `'`) + " key=" + r.Header.Get("X-Api-Key")
		msg, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": echo, "message": echo}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write(msg)
	}))
	t.Cleanup(gw.Close)
	sink := &logtest.Buffer{}
	s, _ := startStack(t, stack.Options{
		Logger: slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Model: &agent.Config{LLM: agent.LLMAnthropic, BaseURL: gw.URL, APIKey: "sk-ant-secret-key-4b2e", Model: "claude-test",
			Timeout: time.Second, MaxRetries: 1, MaxModelCalls: 4, MaxTokens: 64},
	})
	a := newAPI(s.AskURL)
	defer a.close()
	ctx := t.Context()
	w := &witness{}
	tok := mint(t, s.IdP, idp.Claims{OID: "alice"})
	cid := a.conversation(ctx, t, tok)
	ticket := a.ask(ctx, t, tok, cid, made)
	frames := a.events(ctx, t, tok, ticket, "")
	term := checkLog(t, frames, 1, false)
	if term.Type != "error" || term.Kind != "model" {
		t.Errorf("gateway 400: %s/%s, want error/model", term.Type, term.Kind)
	}
	if last := frames[len(frames)-2]; !strings.Contains(last.data, "provider error") {
		t.Errorf("terminal event %s, want it to say \"provider error\"", last.data)
	}
	w.events(frames)
	w.response(a.do(ctx, t, http.MethodGet, "/v1/asks/"+ticket, tok, nil, nil))
	assertClean(t, sink.String(), w, append([]string{canary, "sk-ant-secret-key-4b2e"}, tokenSecrets(tok)...))
}

// The error paths: a source that is down and a model that fails, with debug logs: the error
// event says what broke, never what was asked or with which token.
func TestNoQuestionOrTokenLeaksOnErrors(t *testing.T) {
	dead := "http://" + loopback.Refused(t)
	made := canary + " how many sev1 incidents did we have in 2026-Q2?"
	for _, c := range []struct {
		name string
		opts stack.Options
	}{
		{"source down", stack.Options{Sources: []agent.SourceConfig{{Name: "demo", URL: dead + "/mcp"}}}},
		{"model down", stack.Options{Model: &agent.Config{LLM: agent.LLMOpenAI, BaseURL: dead + "/v1", APIKey: "sk-secret-key-9c1d", Model: "m", Timeout: time.Second, MaxRetries: 1, MaxModelCalls: 4, MaxTokens: 64}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, sink := startStack(t, c.opts)
			a := newAPI(s.AskURL)
			defer a.close()
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			w := &witness{}
			tok := mint(t, s.IdP, idp.Claims{OID: "alice"})
			cid := a.conversation(ctx, t, tok)
			for _, q := range []string{qSev1, made} {
				ticket := a.ask(ctx, t, tok, cid, q)
				frames := a.events(ctx, t, tok, ticket, "")
				if term := checkLog(t, frames, 1, false); term.Type != "error" {
					t.Errorf("%s: %s, want error", c.name, term.Type)
				}
				w.events(frames)
				w.response(a.do(ctx, t, http.MethodGet, "/v1/asks/"+ticket, tok, nil, nil))
			}
			assertClean(t, sink.String(), w, append([]string{canary, qSev1, "sk-secret-key-9c1d"}, tokenSecrets(tok)...))
		})
	}
}
