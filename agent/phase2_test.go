package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/llmstub"
	demosource "github.com/das-ask/ask/demo/source"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/logtest"
)

// part starts one more demo source on the stack's identity provider, serving only part of the
// demo (its own server, validator and audit log, as a second deployment would be).
func (s *stack) part(t *testing.T, p demosource.Part) string {
	t.Helper()
	v, err := auth.New(t.Context(), s.idp.Config(), auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src, err := demosource.New(t.Context(), demosource.Options{Authenticator: v, Serves: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	srv := httptest.NewServer(src.Handler())
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestPhase2AnswerDoesNotDependOnSourceOrder: DAS_SOURCES names a source with the glossary and
// the tables ("everything") and one with the tables only ("tables"). On the wrong-winner
// question the first queries with the catalog's definition in hand, the second without it.
// Whatever order the two are configured in, the answer is the catalog's winner, as the database
// has it: the order of a configuration list decides nothing about the answer. (It used to: the
// branches' work was merged in DAS_SOURCES order and the result is the last statement, so with
// "everything" first the answer was the naive reading's winner, with the catalog's definition
// cited as its provenance.)
func TestPhase2AnswerDoesNotDependOnSourceOrder(t *testing.T) {
	s := newStack(t)
	everything := agent.SourceConfig{Name: "everything", URL: s.source.URL + "/mcp"}
	tables := agent.SourceConfig{Name: "tables", URL: s.part(t, demosource.PartWarehouse)}
	want := fmt.Sprint([][]any{{"Mobile", 14}}) // (failed + rolled_back) / all, 2026-Q3
	for _, order := range [][]agent.SourceConfig{{everything, tables}, {tables, everything}} {
		t.Run(order[0].Name+","+order[1].Name, func(t *testing.T) {
			cfg := agent.DefaultConfig()
			cfg.BaseURL = s.stubURL
			m, err := cfg.NewModel(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			a, err := agent.New(agent.Options{Model: m, Sources: order, Phase: 2})
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			out := a.Run(t.Context(), s.request(t, "alice", "Which team had the highest change failure rate in 2026-Q3?"), rec)
			if out.Answer == nil || out.Answer.Result == nil {
				t.Fatalf("outcome %s, want an answer with a result", outcomeType(out))
			}
			if got := fmt.Sprint(out.Answer.Result.Rows); got != want {
				t.Errorf("result %s, want the catalog's winner %s (sql %q)", got, want, out.Answer.Sql)
			}
			if !slices.ContainsFunc(out.Answer.Provenance, func(p gen.Provenance) bool { return p.Term == "change failure rate" }) {
				t.Errorf("provenance %+v, want the change failure rate's definition", out.Answer.Provenance)
			}
		})
	}
}

// TestProseNeverCarriesTheQuestion: a model that restates the question in its prose (models
// do: "You asked: …") puts it in answer.text and, in phase 2, in divergence.text. No event but
// accepted carries the question; the prose keeps the model's other words.
func TestProseNeverCarriesTheQuestion(t *testing.T) {
	const q = "Which team had the highest change failure rate in 2026-Q3?"
	yaml := string(llmstub.DefaultScriptYAML())
	old := "{{with rows .Last}}{{index . 0 0}} had the highest change failure rate in {{$.Match.quarter}}:"
	if !strings.Contains(yaml, old) {
		t.Fatal("the default script's wrong-winner prose changed; update this test")
	}
	// The question as the model might restate it: other case, other spacing, no question mark.
	yaml = strings.Replace(yaml, old, "You asked: {{upper (index $.Match \"0\")}} — "+old, 1)
	script, err := llmstub.ParseScript([]byte(strings.ReplaceAll(yaml, "You asked: {{upper (index $.Match \"0\")}}", "You asked:   {{upper (index $.Match \"0\")}}")))
	if err != nil {
		t.Fatal(err)
	}
	stub, err := llmstub.New(llmstub.Options{Script: script})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(stub.Handler())
	t.Cleanup(srv.Close)
	s := newStack(t)
	cfg := agent.DefaultConfig()
	cfg.BaseURL = srv.URL + "/v1"
	m, err := cfg.NewModel(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, phase := range []int{1, 2} {
		t.Run(fmt.Sprint("phase ", phase), func(t *testing.T) {
			opts := agent.Options{Model: m, Sources: []agent.SourceConfig{{Name: "demo", URL: s.source.URL + "/mcp"}}, Phase: phase}
			if phase == 2 {
				opts.Sources = []agent.SourceConfig{{Name: "catalog", URL: s.part(t, demosource.PartCatalog)}, {Name: "warehouse", URL: s.part(t, demosource.PartWarehouse)}}
				opts.DivergenceTurns = agent.DefaultDivergenceTurns
			}
			a, err := agent.New(opts)
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			out := a.Run(t.Context(), s.request(t, "alice", q), rec)
			if out.Answer == nil {
				t.Fatalf("outcome %s, want an answer", outcomeType(out))
			}
			texts := []string{out.Answer.Text}
			if phase == 2 {
				d := out.Answer.Divergence
				if d == nil || d.Text == nil {
					t.Fatalf("divergence %+v, want one with its prose", d)
				}
				texts = append(texts, *d.Text)
			}
			for _, text := range texts {
				if !strings.Contains(text, "You asked:") || !strings.Contains(text, "had the highest change failure rate in 2026-Q3") {
					t.Errorf("prose %q lost the model's own words", text)
				}
				if strings.Contains(strings.ToLower(text), "which team had the highest") {
					t.Errorf("prose %q carries the question", text)
				}
			}
			if j := strings.ToLower(rec.eventsJSON(t, out)); strings.Contains(j, "which team had the highest") {
				t.Errorf("an event carries the question: %s", j)
			}
		})
	}
}

// TestPhase2SourceDownBeforeAnyBranch: the run connects to every source before a branch opens;
// a source that cannot be reached ends the run there, in error{transport} naming it, with no
// branch opened and no model call made (docs/decisions.md, "How branch outcomes combine").
func TestPhase2SourceDownBeforeAnyBranch(t *testing.T) {
	s := newStack(t)
	down := httptest.NewServer(nil)
	down.Close() // nothing listens there now
	cfg := agent.DefaultConfig()
	cfg.BaseURL = s.stubURL
	m, err := cfg.NewModel(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{Model: m, Phase: 2, DivergenceTurns: agent.DefaultDivergenceTurns, Sources: []agent.SourceConfig{
		{Name: "catalog", URL: s.part(t, demosource.PartCatalog)}, {Name: "warehouse", URL: down.URL + "/mcp"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	out := a.Run(t.Context(), s.request(t, "alice", "Which team had the highest change failure rate in 2026-Q3?"), rec)
	if out.Error == nil || out.Error.Kind != gen.ErrorKindTransport || !strings.Contains(out.Error.Message, "source warehouse") {
		t.Fatalf("outcome %s %+v, want error{transport} naming the warehouse", outcomeType(out), out.Error)
	}
	if len(rec.events) != 0 || rec.modelCalls() != 0 {
		t.Errorf("events %+v and %d model calls before the sources were connected, want none", rec.events, rec.modelCalls())
	}
}

// TestPhase2ThreeSourcesOnTheStub: DAS_SOURCES naming three sources, two of them with the
// glossary, gives three source branches with their configured names, and the demo's questions
// keep their outcomes on the llm-stub — whose supervisor then sees two branches' catalog
// searches, not one (the churn question's prose used to fail to render: error{model}).
func TestPhase2ThreeSourcesOnTheStub(t *testing.T) {
	s := newStack(t)
	cfg := agent.DefaultConfig()
	cfg.BaseURL = s.stubURL
	m, err := cfg.NewModel(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sources := []agent.SourceConfig{
		{Name: "everything", URL: s.source.URL + "/mcp"},
		{Name: "glossary", URL: s.part(t, demosource.PartCatalog)},
		{Name: "tables", URL: s.part(t, demosource.PartWarehouse)},
	}
	a, err := agent.New(agent.Options{Model: m, Phase: 2, DivergenceTurns: agent.DefaultDivergenceTurns, Sources: sources})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ q, want string }{
		{"What is our customer churn rate?", "abstention"},
		{"Which team had the most incidents in 2026-Q3?", "answer"},
		{"How many sev1 incidents did we have in 2026-Q2?", "answer"},
	} {
		rec := &recorder{}
		out := a.Run(t.Context(), s.request(t, "alice", c.q), rec)
		if got := outcomeType(out); got != c.want {
			t.Errorf("%q: outcome %s %+v, want %s", c.q, got, out.Error, c.want)
		}
		// The branches open in the order of their ids: DAS_SOURCES order, then the withheld
		// branch (they opened in the scheduler's order, the withheld branch most often first).
		var opens []string
		for _, ev := range rec.events {
			if b, ok := ev.(gen.BranchBody); ok && b.BranchId != agent.SupervisorBranch && b.State == gen.BranchBodyStateOpen {
				name := b.Role
				if b.Source != nil {
					name = *b.Source
				}
				opens = append(opens, b.BranchId+" "+name)
			}
		}
		if want := []string{"b2 everything", "b3 glossary", "b4 tables", "b5 withheld"}; !slices.Equal(opens, want) {
			t.Errorf("%q: branches opened %v, want %v", c.q, opens, want)
		}
	}
}

type modelFunc func(model.Request) (model.Response, error)

func (f modelFunc) Complete(_ context.Context, req model.Request) (model.Response, error) {
	return f(req)
}

// TestPhase2SupervisorSeesItsOwnToolNames: two sources offering the same tools are shown to the
// supervisor as east__run_query and west__run_query. The branches' calls it is handed as its own
// must name those tools, not a branch's unqualified run_query, which the supervisor is not
// offered and could not tell apart (a provider may refuse a transcript naming a tool it was
// not given).
func TestPhase2SupervisorSeesItsOwnToolNames(t *testing.T) {
	s := newStack(t)
	url := s.source.URL + "/mcp"
	var mu sync.Mutex
	var supervisor []model.Request
	m := modelFunc(func(req model.Request) (model.Response, error) {
		offered := map[string]bool{}
		for _, t := range req.Tools {
			offered[t.Name] = true
		}
		if offered["east__run_query"] { // the supervisor: every source's tools, qualified
			mu.Lock()
			supervisor = append(supervisor, req)
			mu.Unlock()
			return model.Response{Text: "Both agree."}, nil
		}
		for _, msg := range req.Messages {
			if len(msg.ToolResults) > 0 {
				return model.Response{Text: "Counted."}, nil
			}
		}
		return model.Response{ToolCalls: []model.ToolCall{{ID: "c1", Name: "run_query", Args: json.RawMessage(`{"sql":"SELECT COUNT(*) AS n FROM teams"}`)}}}, nil
	})
	a, err := agent.New(agent.Options{Model: m, Phase: 2, Sources: []agent.SourceConfig{{Name: "east", URL: url}, {Name: "west", URL: url}}})
	if err != nil {
		t.Fatal(err)
	}
	out := a.Run(t.Context(), s.request(t, "alice", "How many teams are there?"), &recorder{})
	if out.Answer == nil {
		t.Fatalf("outcome %s %+v, want an answer", outcomeType(out), out.Error)
	}
	if len(supervisor) != 1 {
		t.Fatalf("%d supervisor calls, want 1", len(supervisor))
	}
	req := supervisor[0]
	offered := map[string]bool{}
	for _, t := range req.Tools {
		offered[t.Name] = true
	}
	var named []string
	for _, msg := range req.Messages {
		for _, c := range msg.ToolCalls {
			named = append(named, c.Name)
			if !offered[c.Name] {
				t.Errorf("the supervisor is handed a call to %q, a tool it is not offered", c.Name)
			}
		}
	}
	slices.Sort(named)
	if want := []string{"east__run_query", "west__run_query"}; !slices.Equal(named, want) {
		t.Errorf("delegated calls %v, want %v", named, want)
	}
}

// panicking is a model that panics on the call whose tools are exactly the catalog's (the
// catalog branch's first call), as a provider SDK's bug on an odd reply would, and otherwise
// is m.
type panicking struct{ m model.Model }

func (p panicking) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	names := make([]string, 0, len(req.Tools))
	for _, tl := range req.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	if slices.Equal(names, []string{"define_term", "search_catalog"}) {
		panic("the model adapter broke")
	}
	return p.m.Complete(ctx, req)
}

// TestPhase2BranchPanicIsAnError: a panic in a source branch (its own goroutine) ends the run in
// error{internal}, as a panic of a phase-1 run does (the service turns a runner's panic into
// one), with every branch closed; it does not take the process, and every run in it, down.
func TestPhase2BranchPanicIsAnError(t *testing.T) {
	s := newStack(t)
	logs := &logtest.Buffer{}
	a := s.phase2AgentLogging(t, func(m model.Model) model.Model { return panicking{m} }, slog.New(slog.NewJSONHandler(logs, nil)))
	rec := &recorder{}
	req := s.request(t, "alice", "Which team had the highest change failure rate in 2026-Q3?")
	out := a.Run(t.Context(), req, rec)
	if out.Error == nil || out.Error.Kind != gen.ErrorKindInternal {
		t.Fatalf("outcome %s %+v, want error{internal}", outcomeType(out), out.Error)
	}
	// The error line names the ask it ended, as every line about a run does, so the operator
	// finds the panic from the ticket whose error{internal} a user reports.
	var panicked map[string]any
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "branch panicked" {
			panicked = rec
		}
	}
	if panicked == nil || panicked["ticket"] != req.Ticket {
		t.Errorf("branch panicked line %v, want one with ticket %q", panicked, req.Ticket)
	}
	open := map[string]int{}
	for _, ev := range rec.events {
		if b, ok := ev.(gen.BranchBody); ok {
			open[b.BranchId] += map[gen.BranchBodyState]int{gen.BranchBodyStateOpen: 1, gen.BranchBodyStateClose: -1}[b.State]
		}
	}
	for id, n := range open {
		if n != 0 {
			t.Errorf("branch %s: %d opens more than closes", id, n)
		}
	}
}

// phase2Agent is a phase-2 agent on the stack's catalog and warehouse, whose model is the
// stub's wrapped by wrap.
func (s *stack) phase2Agent(t *testing.T, wrap func(model.Model) model.Model) *agent.Agent {
	t.Helper()
	return s.phase2AgentLogging(t, wrap, nil)
}

// phase2AgentLogging is phase2Agent logging to log.
func (s *stack) phase2AgentLogging(t *testing.T, wrap func(model.Model) model.Model, log *slog.Logger) *agent.Agent {
	t.Helper()
	cfg := agent.DefaultConfig()
	cfg.BaseURL = s.stubURL
	m, err := cfg.NewModel(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{Model: wrap(m), Phase: 2, DivergenceTurns: agent.DefaultDivergenceTurns, Logger: log, Sources: []agent.SourceConfig{
		{Name: "catalog", URL: s.part(t, demosource.PartCatalog)}, {Name: "warehouse", URL: s.part(t, demosource.PartWarehouse)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// stallingWithheld is m, but for the catalog-withheld branch (the one call whose system prompt
// says nothing of a catalog), whose model calls never answer: a provider that hangs on one
// request.
type stallingWithheld struct{ m model.Model }

func (s stallingWithheld) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	if !strings.Contains(req.System, "catalog") {
		<-ctx.Done()
		return model.Response{}, ctx.Err()
	}
	return s.m.Complete(ctx, req)
}

// TestPhase2StalledWithheldBranchStillAnswers: the withheld branch's failure never fails the
// ask, and nor does its slowness: with its model hanging, the answer comes before the run's
// deadline, without divergence, and the branch is closed. The supervisor used to wait for it
// before reconciling, and the ask ended in error{timeout}.
func TestPhase2StalledWithheldBranchStillAnswers(t *testing.T) {
	s := newStack(t)
	a := s.phase2Agent(t, func(m model.Model) model.Model { return stallingWithheld{m} })
	// The run's deadline, as the service sets it; the stub answers the rest in well under it.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	rec := &recorder{}
	out := a.Run(ctx, s.request(t, "alice", "Which team had the highest change failure rate in 2026-Q3?"), rec)
	if out.Answer == nil {
		t.Fatalf("outcome %s %+v, want the answer", outcomeType(out), out.Error)
	}
	if out.Answer.Divergence != nil {
		t.Errorf("divergence %+v from a withheld branch that never answered", out.Answer.Divergence)
	}
	if ctx.Err() != nil {
		t.Errorf("the run returned after its deadline")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	closed := false
	for _, ev := range rec.events {
		if b, ok := ev.(gen.BranchBody); ok && b.Role == agent.RoleWithheld && b.State == gen.BranchBodyStateClose {
			closed = true
		}
	}
	if !closed {
		t.Errorf("the withheld branch was not closed")
	}
}
