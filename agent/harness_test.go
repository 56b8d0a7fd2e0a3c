package agent_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp/idptest"
	"github.com/das-ask/ask/demo/llmstub"
	demosource "github.com/das-ask/ask/demo/source"
	"github.com/das-ask/ask/gen"
)

// stack is the dev stack in process: an identity provider, the demo source (a real MCP server
// that validates bearers and can refuse) and the llm-stub (a real OpenAI-compatible server).
type stack struct {
	idp     *idptest.Server
	source  *httptest.Server
	stub    *llmstub.Stub
	stubURL string
	logs    *bytes.Buffer
	logMu   *sync.Mutex
}

func newStack(t *testing.T) *stack {
	t.Helper()
	ctx := t.Context()
	ip := idptest.Start(t)
	v, err := auth.New(ctx, ip.Config(), auth.Options{})
	if err != nil {
		t.Fatalf("auth.New: %v", err)
	}
	src, err := demosource.New(ctx, demosource.Options{Authenticator: v})
	if err != nil {
		t.Fatalf("demo source: %v", err)
	}
	t.Cleanup(func() { src.Close() })
	srcSrv := httptest.NewServer(src.Handler())
	t.Cleanup(srcSrv.Close)
	stub, err := llmstub.New(llmstub.Options{RequireAuth: true})
	if err != nil {
		t.Fatalf("llmstub: %v", err)
	}
	stubSrv := httptest.NewServer(stub.Handler())
	t.Cleanup(stubSrv.Close)
	return &stack{idp: ip, source: srcSrv, stub: stub, stubURL: stubSrv.URL + "/v1", logs: &bytes.Buffer{}, logMu: &sync.Mutex{}}
}

// agent returns an Agent on the stack: m, or else the model ASK_LLM=stub configures (the
// production OpenAI adapter pointed at the stub); the demo source as "demo"; and a logger whose
// every line the test can read.
func (s *stack) agent(t *testing.T, m model.Model) *agent.Agent {
	t.Helper()
	log := slog.New(slog.NewJSONHandler(lockedWriter{s.logMu, s.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if m == nil {
		// ASK_LLM=stub, exactly as the service configures it: the OpenAI adapter at the stub.
		cfg := agent.DefaultConfig()
		cfg.BaseURL = s.stubURL
		var err error
		if m, err = cfg.NewModel(nil, log); err != nil {
			t.Fatal(err)
		}
	}
	a, err := agent.New(agent.Options{
		Model:   m,
		Sources: []agent.SourceConfig{{Name: "demo", URL: s.source.URL + "/mcp"}},
		Logger:  log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (s *stack) request(t *testing.T, oid, question string, history ...ask.Turn) ask.Request {
	return ask.Request{
		Ticket: "tkt_test", ConversationID: "cnv_test", Question: question, History: history,
		Identity: ask.Identity{OID: oid, Token: s.idp.Token(t, oid)},
	}
}

// audit returns the demo source's audit entries (GET /audit answers JSON lines).
func (s *stack) audit(t *testing.T) []demosource.AuditEntry {
	t.Helper()
	resp, err := http.Get(s.source.URL + "/audit")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []demosource.AuditEntry
	dec := json.NewDecoder(resp.Body)
	for dec.More() {
		var e demosource.AuditEntry
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("audit: %v", err)
		}
		out = append(out, e)
	}
	return out
}

// assertNotLogged fails if any log line holds s (the question, a token).
func (s *stack) assertNotLogged(t *testing.T, what, text string) {
	t.Helper()
	s.logMu.Lock()
	defer s.logMu.Unlock()
	if s.logs.Len() == 0 {
		t.Fatalf("no log lines at all: the check would prove nothing")
	}
	if strings.Contains(strings.ToLower(s.logs.String()), strings.ToLower(text)) {
		t.Errorf("the %s appears in a log line:\n%s", what, s.logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// recorder is an ask.Emitter that keeps everything, in order: calls counts the model calls sent,
// usage holds each returned call's tokens. onModelCall, when set, runs after each model call's
// tokens are recorded, that is once it has returned (tests use it to cancel between turns).
type recorder struct {
	mu          sync.Mutex
	events      []any
	steps       []gen.StepBody
	milestones  []gen.MilestoneBody
	calls       int
	usage       []ask.Usage
	onModelCall func(n int)
}

func (r *recorder) Branch(b gen.BranchBody) {
	r.mu.Lock()
	r.events = append(r.events, b)
	r.mu.Unlock()
}
func (r *recorder) Step(b gen.StepBody) {
	r.mu.Lock()
	r.events = append(r.events, b)
	r.steps = append(r.steps, b)
	r.mu.Unlock()
}
func (r *recorder) Milestone(b gen.MilestoneBody) {
	r.mu.Lock()
	r.events = append(r.events, b)
	r.milestones = append(r.milestones, b)
	r.mu.Unlock()
}
func (r *recorder) ModelCall(u ask.Usage) {
	r.mu.Lock()
	r.calls++
	if u != (ask.Usage{}) {
		r.usage = append(r.usage, u)
	}
	r.mu.Unlock()
}
func (r *recorder) Tokens(u ask.Usage) {
	r.mu.Lock()
	r.usage = append(r.usage, u)
	n := len(r.usage)
	hook := r.onModelCall
	r.mu.Unlock()
	if hook != nil {
		hook(n)
	}
}

// modelCalls is how many model calls were reported sent.
func (r *recorder) modelCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// tokens sums the usage reported.
func (r *recorder) tokens() (in, out int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range r.usage {
		in += u.InputTokens
		out += u.OutputTokens
	}
	return in, out
}

// eventsJSON is every event body as JSON, for "never carries the question" checks.
func (r *recorder) eventsJSON(t *testing.T, out ask.Outcome) string {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := json.Marshal(struct {
		Events  []any
		Outcome ask.Outcome
	}{r.events, out})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func outcomeType(o ask.Outcome) string {
	switch {
	case o.Answer != nil:
		return "answer"
	case o.Abstention != nil:
		return "abstention"
	case o.Refusal != nil:
		return "refusal"
	case o.Error != nil:
		return "error:" + string(o.Error.Kind)
	}
	return "none"
}

type demoAudit = demosource.AuditEntry
