package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/gen"
)

// scripted is a fake model.Model: turn i of a run is script[i](request). It records every
// request, so tests can see what went back to the model.
type scripted struct {
	mu     sync.Mutex
	script []func(model.Request) (model.Response, error)
	reqs   []model.Request
}

func (m *scripted) Complete(_ context.Context, req model.Request) (model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs = append(m.reqs, req)
	i := len(m.reqs) - 1
	if i >= len(m.script) {
		return model.Response{Text: "out of script"}, nil
	}
	return m.script[i](req)
}

func call(id, tool string, args any) func(model.Request) (model.Response, error) {
	return func(model.Request) (model.Response, error) {
		b, _ := json.Marshal(args)
		return model.Response{ToolCalls: []model.ToolCall{{ID: id, Name: tool, Args: b}}, Usage: model.Usage{InputTokens: 10, OutputTokens: 2}}, nil
	}
}

func say(text string) func(model.Request) (model.Response, error) {
	return func(model.Request) (model.Response, error) {
		return model.Response{Text: text, Usage: model.Usage{InputTokens: 10, OutputTokens: 5}}, nil
	}
}

func TestToolErrorGoesBackToTheModel(t *testing.T) {
	s := newStack(t)
	m := &scripted{}
	m.script = []func(model.Request) (model.Response, error){
		call("c1", "run_query", map[string]any{"sql": "SELEC COUNT(*) FROM incidents"}),
		func(req model.Request) (model.Response, error) {
			if tr := m.lastResultLocked(); !tr.IsError || tr.Content == "" {
				return model.Response{}, errors.New("the bad SQL did not come back as a tool error")
			}
			return call("c2", "run_query", map[string]any{"sql": "SELECT COUNT(*) AS n FROM incidents"})(req)
		},
		say("There were that many."),
	}
	rec := &recorder{}
	out := s.agent(t, m).Run(t.Context(), s.request(t, "alice", "how many incidents?"), rec)
	if out.Answer == nil {
		t.Fatalf("outcome = %s (%+v), want answer", outcomeType(out), out.Error)
	}
	if len(rec.steps) != 2 || rec.steps[0].Error == nil || rec.steps[0].Refused || rec.steps[1].Error != nil {
		t.Fatalf("steps = %+v, want a tool error (not refused) then a success", rec.steps)
	}
	// Only the statement that ran is in sql.
	if !slices.Equal(out.Answer.Sql, []string{"SELECT COUNT(*) AS n FROM incidents"}) {
		t.Errorf("sql = %q", out.Answer.Sql)
	}
	if out.Answer.Headline == nil || out.Answer.Headline.Label != "n" {
		t.Errorf("headline = %+v", out.Answer.Headline)
	}
	if len(out.Answer.Provenance) != 0 || out.Answer.Path.Detail != "warehouse" {
		t.Errorf("provenance = %+v, path = %+v; want none and warehouse", out.Answer.Provenance, out.Answer.Path)
	}
	if rec.modelCalls() != 3 || len(rec.usage) != 3 {
		t.Errorf("model calls = %d, returned = %d, want 3 and 3", rec.modelCalls(), len(rec.usage))
	}
	if in, outTok := rec.tokens(); in != 30 || outTok != 9 {
		t.Errorf("tokens = %d/%d, want 30/9", in, outTok)
	}
}

// lastResultLocked is the tool result the model got back in its latest request; m.mu is held.
func (m *scripted) lastResultLocked() model.ToolResult {
	msgs := m.reqs[len(m.reqs)-1].Messages
	last := msgs[len(msgs)-1]
	if len(last.ToolResults) != 1 {
		return model.ToolResult{}
	}
	return last.ToolResults[0]
}

func TestWriteIsARefusalNotAToolError(t *testing.T) {
	s := newStack(t)
	m := &scripted{script: []func(model.Request) (model.Response, error){
		call("c1", "run_query", map[string]any{"sql": "DELETE FROM incidents"}),
		say("should never be asked"),
	}}
	rec := &recorder{}
	out := s.agent(t, m).Run(t.Context(), s.request(t, "alice", "delete them"), rec)
	if out.Refusal == nil || out.Refusal.Tool != "run_query" || out.Refusal.CallId != rec.steps[0].CallId {
		t.Fatalf("outcome = %s %+v, want refusal of run_query", outcomeType(out), out.Refusal)
	}
	if len(m.reqs) != 1 {
		t.Errorf("model calls = %d, want 1: the run ends at the refusal", len(m.reqs))
	}
}

func TestUnknownToolAndBadArgsGoBackToTheModel(t *testing.T) {
	s := newStack(t)
	m := &scripted{}
	m.script = []func(model.Request) (model.Response, error){
		call("c1", "drop_everything", map[string]any{}),
		func(model.Request) (model.Response, error) {
			return model.Response{ToolCalls: []model.ToolCall{{ID: "c2", Name: "define_term", Args: json.RawMessage(`["x"]`)}}}, nil
		},
		call("c3", "define_term", map[string]any{"term": "MTTR"}),
		say("MTTR is the mean time to restore."),
	}
	rec := &recorder{}
	out := s.agent(t, m).Run(t.Context(), s.request(t, "alice", "what is mttr"), rec)
	if out.Answer == nil || out.Answer.Path.Speed != gen.AnswerPathSpeedFast || len(out.Answer.Provenance) != 1 {
		t.Fatalf("outcome = %s %+v, want a catalog answer", outcomeType(out), out.Answer)
	}
	if len(rec.steps) != 1 {
		t.Errorf("steps = %+v, want only the call that reached a source", rec.steps)
	}
	for i, want := range []string{"no tool named", "JSON object"} {
		msgs := m.reqs[i+1].Messages
		tr := msgs[len(msgs)-1].ToolResults[0]
		if !tr.IsError || !strings.Contains(tr.Content, want) {
			t.Errorf("result %d = %+v, want an error containing %q", i, tr, want)
		}
	}
}

func TestModelFailureIsAModelError(t *testing.T) {
	s := newStack(t)
	m := &scripted{script: []func(model.Request) (model.Response, error){
		func(model.Request) (model.Response, error) {
			return model.Response{Usage: model.Usage{InputTokens: 7}}, &model.Error{Kind: model.KindRefused, Message: "the model refused"}
		},
	}}
	rec := &recorder{}
	out := s.agent(t, m).Run(t.Context(), s.request(t, "alice", "anything"), rec)
	if out.Error == nil || out.Error.Kind != gen.ErrorKindModel || !strings.Contains(out.Error.Message, "refused") {
		t.Fatalf("outcome = %s %+v, want error model", outcomeType(out), out.Error)
	}
	if rec.modelCalls() != 1 || len(rec.usage) != 1 || rec.usage[0].InputTokens != 7 {
		t.Errorf("usage = %+v, want the failed call counted", rec.usage)
	}
}

func TestTooManyTurns(t *testing.T) {
	s := newStack(t)
	loop := call("c", "list_tables", map[string]any{})
	m := &scripted{script: []func(model.Request) (model.Response, error){loop, loop, loop, loop}}
	a, err := agent.New(agent.Options{Model: m, Sources: []agent.SourceConfig{{Name: "demo", URL: s.source.URL + "/mcp"}}, MaxModelCalls: 3})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	out := a.Run(t.Context(), s.request(t, "alice", "loop"), rec)
	if out.Error == nil || out.Error.Kind != gen.ErrorKindModel || !strings.Contains(out.Error.Message, "too many turns") {
		t.Fatalf("outcome = %s %+v, want error model too many turns", outcomeType(out), out.Error)
	}
	if len(m.reqs) != 3 || len(rec.steps) != 3 {
		t.Errorf("model calls = %d, steps = %d, want 3 and 3", len(m.reqs), len(rec.steps))
	}
}

func TestRejectedTokenIsTransport(t *testing.T) {
	s := newStack(t)
	expired, err := s.idp.Mint(idp.Claims{OID: "alice", Expired: true})
	if err != nil {
		t.Fatal(err)
	}
	m := &scripted{}
	req := s.request(t, "alice", "anything")
	req.Identity.Token = expired
	out := s.agent(t, m).Run(t.Context(), req, &recorder{})
	if out.Error == nil || out.Error.Kind != gen.ErrorKindTransport || !strings.Contains(out.Error.Message, "401") {
		t.Fatalf("outcome = %s %+v, want error transport naming 401", outcomeType(out), out.Error)
	}
	// The run's identity does not say when its token expires: the message cannot say it did.
	if strings.Contains(out.Error.Message, "expired") {
		t.Errorf("message = %q, want no expiry named when the identity has none", out.Error.Message)
	}
	if strings.Contains(out.Error.Message, expired) || len(m.reqs) != 0 {
		t.Errorf("message = %q, model calls = %d; want no token and no model call", out.Error.Message, len(m.reqs))
	}
}

// A source's 401 once the caller's token has passed its exp says so: "rejected the
// credentials" alone could be a source that trusts another issuer or audience, and the user
// whose token the service accepted a few seconds before could not tell which. The phrase is
// the service's own (from the exp it validated), never the source's challenge.
func TestExpiredTokenIsNamedAsTheCause(t *testing.T) {
	s := newStack(t)
	expired, err := s.idp.Mint(idp.Claims{OID: "alice", Expired: true})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UTC()
	for _, tt := range []struct {
		name    string
		expires time.Time
		want    string // "" = no expiry named
	}{
		{name: "passed", expires: exp, want: ": the caller's token expired at " + exp.Format(time.RFC3339)},
		{name: "not passed", expires: time.Now().Add(time.Hour)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := s.request(t, "alice", "anything")
			req.Identity.Token, req.Identity.Expires = expired, tt.expires
			out := s.agent(t, &scripted{}).Run(t.Context(), req, &recorder{})
			if out.Error == nil || out.Error.Kind != gen.ErrorKindTransport {
				t.Fatalf("outcome = %s %+v, want error transport", outcomeType(out), out.Error)
			}
			const base = "source demo: connect: rejected the credentials (HTTP 401)"
			if got, want := out.Error.Message, base+tt.want; got != want {
				t.Errorf("message = %q, want %q", got, want)
			}
		})
	}
}

// expireAfter is a transport that swaps the bearer for an expired one once armed, as if the
// caller's token expired mid-run.
type expireAfter struct {
	mu      sync.Mutex
	armed   bool
	expired string
}

func (e *expireAfter) RoundTrip(r *http.Request) (*http.Response, error) {
	e.mu.Lock()
	armed := e.armed
	e.mu.Unlock()
	if armed {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+e.expired)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestTokenExpiresMidRun(t *testing.T) {
	s := newStack(t)
	expired, err := s.idp.Mint(idp.Claims{OID: "alice", Expired: true})
	if err != nil {
		t.Fatal(err)
	}
	tr := &expireAfter{expired: expired}
	m := &scripted{}
	m.script = []func(model.Request) (model.Response, error){
		call("c1", "list_tables", map[string]any{}),
		func(req model.Request) (model.Response, error) {
			tr.mu.Lock()
			tr.armed = true
			tr.mu.Unlock()
			return call("c2", "describe_table", map[string]any{"table": "teams"})(req)
		},
		say("never"),
	}
	a, err := agent.New(agent.Options{Model: m, Sources: []agent.SourceConfig{{Name: "demo", URL: s.source.URL + "/mcp"}}, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	out := a.Run(t.Context(), s.request(t, "alice", "tables?"), rec)
	if out.Error == nil || out.Error.Kind != gen.ErrorKindTransport {
		t.Fatalf("outcome = %s %+v, want error transport", outcomeType(out), out.Error)
	}
	if len(rec.steps) != 2 || rec.steps[1].Error == nil || rec.steps[1].Refused {
		t.Errorf("steps = %+v, want the second call reported as failed, not refused", rec.steps)
	}
	if len(m.reqs) != 2 {
		t.Errorf("model calls = %d, want 2", len(m.reqs))
	}
}

func TestUnreachableSourceIsTransport(t *testing.T) {
	s := newStack(t)
	logs := &logSink{}
	a, err := agent.New(agent.Options{Model: &scripted{}, Logger: logs.logger(),
		Sources: []agent.SourceConfig{{Name: "gone", URL: "http://127.0.0.1:1/mcp"}}})
	if err != nil {
		t.Fatal(err)
	}
	req := s.request(t, "alice", "anything about the unreachable")
	out := a.Run(t.Context(), req, &recorder{})
	if out.Error == nil || out.Error.Kind != gen.ErrorKindTransport || !strings.Contains(out.Error.Message, "gone") {
		t.Fatalf("outcome = %s %+v, want error transport naming the source", outcomeType(out), out.Error)
	}
	// The operator learns which source failed, for which ask, from a warning; never the
	// question or the token.
	line := logLine(t, logs, "source unreachable")
	if line["level"] != "WARN" || line["source"] != "gone" || line["ticket"] != req.Ticket || line["error"] == "" {
		t.Errorf("source unreachable line = %v, want a warning naming the source, the ticket and the error", line)
	}
	logs.assertAbsent(t, req.Question, req.Identity.Token)
}

// A tool call that ends (answer, tool error or refusal) is a debug line, with the ask's ticket:
// the ask's one info line is obs's "ask finished" (docs/operations.md).
func TestToolCallLogLevel(t *testing.T) {
	s := newStack(t)
	logs := &logSink{}
	m := &scripted{script: []func(model.Request) (model.Response, error){
		call("c1", "run_query", map[string]any{"sql": "SELECT COUNT(*) AS n FROM teams"}),
		say("Counted."),
	}}
	a, err := agent.New(agent.Options{Model: m, Logger: logs.logger(), Sources: []agent.SourceConfig{{Name: "demo", URL: s.source.URL + "/mcp"}}})
	if err != nil {
		t.Fatal(err)
	}
	req := s.request(t, "alice", "how many teams are there")
	if out := a.Run(t.Context(), req, &recorder{}); out.Answer == nil {
		t.Fatalf("outcome = %s %+v, want answer", outcomeType(out), out.Error)
	}
	line := logLine(t, logs, "tool call")
	if line["level"] != "DEBUG" || line["source"] != "demo" || line["tool"] != "run_query" || line["ticket"] != req.Ticket || line["outcome"] != "ok" {
		t.Errorf("tool call line = %v, want a debug line naming the source, tool, ticket and outcome", line)
	}
	logs.assertAbsent(t, req.Question, req.Identity.Token)
}

// logLine is the first JSON line logs holds with msg, decoded.
func logLine(t *testing.T, logs *logSink, msg string) map[string]any {
	t.Helper()
	for l := range strings.SplitSeq(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	t.Fatalf("no %q line in the log:\n%s", msg, logs.String())
	return nil
}

func TestTwoSourcesAreMulti(t *testing.T) {
	s := newStack(t)
	url := s.source.URL + "/mcp"
	m := &scripted{}
	m.script = []func(model.Request) (model.Response, error){
		func(req model.Request) (model.Response, error) {
			var names []string
			for _, t := range req.Tools {
				names = append(names, t.Name)
			}
			if !slices.Contains(names, "east__run_query") || !slices.Contains(names, "west__run_query") {
				return model.Response{}, errors.New("tools not qualified by source: " + strings.Join(names, ","))
			}
			return call("c1", "east__run_query", map[string]any{"sql": "SELECT COUNT(*) AS n FROM teams"})(req)
		},
		call("c2", "west__run_query", map[string]any{"sql": "SELECT name FROM teams ORDER BY name LIMIT 2"}),
		say("Both agree."),
	}
	a, err := agent.New(agent.Options{Model: m, Sources: []agent.SourceConfig{{Name: "east", URL: url}, {Name: "west", URL: url}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	out := a.Run(t.Context(), s.request(t, "alice", "compare"), rec)
	if out.Answer == nil {
		t.Fatalf("outcome = %s %+v, want answer", outcomeType(out), out.Error)
	}
	if out.Answer.Path.Detail != "multi" || len(out.Answer.Sql) != 2 || out.Answer.Headline != nil {
		t.Errorf("answer = %+v, want multi with two statements and no headline", out.Answer)
	}
	if got := out.Answer.Result.Columns; !slices.Equal(got, []string{"name"}) || len(out.Answer.Result.Rows) != 2 {
		t.Errorf("result = %+v, want the last statement's rows", out.Answer.Result)
	}
	want := []gen.MilestoneBody{
		{Phase: gen.MilestonePhaseQuerying, Subject: "teams", Source: "east"},
		{Phase: gen.MilestonePhaseReconciling, Subject: "teams", Source: "west"},
	}
	if !slices.Equal(rec.milestones, want) {
		t.Errorf("milestones = %+v, want %+v", rec.milestones, want)
	}
	if rec.steps[0].Tool != "run_query" || rec.steps[0].Source != "east" || rec.steps[1].Source != "west" {
		t.Errorf("steps = %+v, want the source's own tool name and the source", rec.steps)
	}
}

func TestQuestionInArgsIsRedacted(t *testing.T) {
	s := newStack(t)
	const q = "what is the mean time to restore"
	m := &scripted{script: []func(model.Request) (model.Response, error){
		call("c1", "search_catalog", map[string]any{"query": q}),
		say("I could not find it."),
	}}
	rec := &recorder{}
	out := s.agent(t, m).Run(t.Context(), s.request(t, "alice", q), rec)
	if len(rec.steps) != 1 || rec.steps[0].Args["query"] != "[the question]" {
		t.Errorf("step args = %+v, want the question redacted", rec.steps)
	}
	assertQuestionKept(t, s, rec, out, q)
}

// cancelOnCall is a transport that cancels the run as a tool call's request leaves, so the
// call is in flight when the run is cancelled.
type cancelOnCall struct{ cancel context.CancelFunc }

func (c cancelOnCall) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Header.Get("Ask-Call-Id") != "" {
		c.cancel()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func TestCancelLetsTheInFlightCallFinish(t *testing.T) {
	s := newStack(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	m := &scripted{script: []func(model.Request) (model.Response, error){
		call("c1", "run_query", map[string]any{"sql": "SELECT COUNT(*) AS n FROM teams"}),
		say("must not be asked"),
	}}
	a, err := agent.New(agent.Options{Model: m, Sources: []agent.SourceConfig{{Name: "demo", URL: s.source.URL + "/mcp"}}, HTTPClient: &http.Client{Transport: cancelOnCall{cancel}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	out := a.Run(ctx, s.request(t, "alice", "count teams"), rec)
	if out.Error == nil || out.Error.Kind != gen.ErrorKindCancelled {
		t.Fatalf("outcome = %s, want error cancelled", outcomeType(out))
	}
	if len(m.reqs) != 1 {
		t.Errorf("model calls = %d, want 1: none after cancel", len(m.reqs))
	}
	if len(rec.steps) != 1 || rec.steps[0].Error != nil {
		t.Fatalf("steps = %+v, want the in-flight call completed", rec.steps)
	}
	audit := s.audit(t)
	if i := slices.IndexFunc(audit, func(e demoAudit) bool { return e.CallID == rec.steps[0].CallId }); i < 0 || audit[i].Status != "ok" {
		t.Errorf("audit = %+v, want the in-flight call recorded as ok", audit)
	}
}

func TestQuestionNeverBecomesATerm(t *testing.T) {
	s := newStack(t)
	const q = "What is our customer churn rate?"
	m := &scripted{script: []func(model.Request) (model.Response, error){
		call("c1", "search_catalog", map[string]any{"query": "what is our Customer churn rate"}),
		call("c2", "search_catalog", map[string]any{"query": "churn"}),
		say("I could not find it."),
	}}
	rec := &recorder{}
	out := s.agent(t, m).Run(t.Context(), s.request(t, "alice", q), rec)
	if out.Abstention == nil || !slices.Equal(out.Abstention.Terms, []string{"churn"}) {
		t.Fatalf("outcome = %s %+v, want abstention with terms [churn]", outcomeType(out), out.Abstention)
	}
	if rec.steps[0].Args["query"] != "[the question]" || rec.milestones[0].Subject == "" || strings.Contains(strings.ToLower(rec.milestones[0].Subject), "customer churn rate") {
		t.Errorf("step = %+v, milestone = %+v; want the question redacted and kept out of the subject", rec.steps[0], rec.milestones[0])
	}
}

func TestQuestionNestedInArgsIsRedacted(t *testing.T) {
	s := newStack(t)
	const q = "which services page the on-call engineer twice"
	m := &scripted{script: []func(model.Request) (model.Response, error){
		call("c1", "search_catalog", map[string]any{"query": "incident", "filters": map[string]any{"text": q}, "also": []any{"paging", q}}),
		say("I could not find it."),
	}}
	rec := &recorder{}
	out := s.agent(t, m).Run(t.Context(), s.request(t, "alice", q), rec)
	if len(rec.steps) != 1 {
		t.Fatalf("steps = %+v, want one", rec.steps)
	}
	assertQuestionKept(t, s, rec, out, q)
}

func TestEarlierQuestionKeptOutOfAFollowUp(t *testing.T) {
	s := newStack(t)
	const earlier = "which team owns the checkout service"
	m := &scripted{script: []func(model.Request) (model.Response, error){
		call("c1", "search_catalog", map[string]any{"query": earlier}),
		call("c2", "search_catalog", map[string]any{"query": "owner", "terms": []any{earlier}}),
		say("I could not find it."),
	}}
	rec := &recorder{}
	history := []ask.Turn{{Question: earlier, Outcome: gen.EventTypeAbstention, Text: "no answer"}}
	out := s.agent(t, m).Run(t.Context(), s.request(t, "alice", "and how many incidents did it have?", history...), rec)
	if out.Abstention == nil || !slices.Equal(out.Abstention.Terms, []string{"owner"}) {
		t.Fatalf("outcome = %s %+v, want an abstention with the term owner, never the earlier question", outcomeType(out), out.Abstention)
	}
	assertQuestionKept(t, s, rec, out, earlier)
}

func TestSourceMessageQuotingTheQuestionIsWithheld(t *testing.T) {
	s := newStack(t)
	const q = "what does blast radius mean here"
	m := &scripted{}
	m.script = []func(model.Request) (model.Response, error){
		// The demo source's error names the term it does not know: here, the question.
		call("c1", "define_term", map[string]any{"term": q}),
		func(req model.Request) (model.Response, error) {
			if tr := m.lastResultLocked(); !tr.IsError || !strings.Contains(tr.Content, q) {
				return model.Response{}, errors.New("the model did not get the source's own words")
			}
			return call("c2", "run_query", map[string]any{"sql": "SELECT COUNT(*) AS n FROM teams WHERE name <> '" + q + "'"})(req)
		},
		say("There are that many teams."),
	}
	rec := &recorder{}
	out := s.agent(t, m).Run(t.Context(), s.request(t, "alice", q), rec)
	if out.Answer == nil {
		t.Fatalf("outcome = %s %+v, want answer", outcomeType(out), out.Error)
	}
	if len(rec.steps) != 2 || rec.steps[0].Error == nil || *rec.steps[0].Error == "" {
		t.Fatalf("steps = %+v, want the failed call's step to say it failed", rec.steps)
	}
	assertQuestionKept(t, s, rec, out, q)
}

// A statement may select the question itself — as a value or as a column's name — and the source
// returns it in the result. The SQL is withheld for holding it; the result, the headline (here
// both the label and the value are the question) and a phase-2 divergence built from it must be
// too, or the answer event carries the question past the redacted SQL (to a webhook, and to disk
// with a durable store, which seals only the accepted event and the turns).
func TestQuestionSelectedIntoTheResultIsWithheld(t *testing.T) {
	for _, tc := range []struct{ name, sql string }{
		{"value", "SELECT '%s' AS q, 7 AS n"},
		{"column", `SELECT 7 AS "%s"`},
		{"headline value", "SELECT '%s' AS q"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStack(t)
			const q = "what is the blast radius of checkout"
			m := &scripted{script: []func(model.Request) (model.Response, error){
				call("c1", "run_query", map[string]any{"sql": strings.ReplaceAll(tc.sql, "%s", q)}),
				say("Here it is."),
			}}
			rec := &recorder{}
			out := s.agent(t, m).Run(t.Context(), s.request(t, "alice", q), rec)
			if out.Answer == nil || out.Answer.Result == nil || len(out.Answer.Result.Rows) != 1 {
				t.Fatalf("outcome = %s %+v, want an answer with one row", outcomeType(out), out.Error)
			}
			assertQuestionKept(t, s, rec, out, q)
		})
	}
}

// blocking is a model whose every call is held until the run's context ends.
type blocking struct{ arrived chan struct{} }

func (m blocking) Complete(ctx context.Context, _ model.Request) (model.Response, error) {
	m.arrived <- struct{}{}
	<-ctx.Done()
	return model.Response{}, ctx.Err()
}

// TestACallCutOffStillCounts: a model call is reported as it is sent, for the service writes
// done when a cancel, a shutdown or the deadline ends the run, not when the call in flight comes
// back, and ignores what is reported after: a call reported only on its return was left out of
// done.model_calls (0 after a second SIGTERM during the llm-stub's turn) while
// ask_model_calls_total and ask_model_errors_total{kind="cancelled"} counted it.
func TestACallCutOffStillCounts(t *testing.T) {
	s := newStack(t)
	m := blocking{arrived: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rec := &recorder{}
	ended := make(chan ask.Outcome)
	go func() { ended <- s.agent(t, m).Run(ctx, s.request(t, "alice", "anything"), rec) }()
	<-m.arrived
	atDone := rec.modelCalls() // what done would say, written as the run is cancelled
	cancel()
	out := <-ended
	if out.Error == nil || out.Error.Kind != gen.ErrorKindCancelled {
		t.Fatalf("outcome = %s %+v, want error cancelled", outcomeType(out), out.Error)
	}
	if atDone != 1 {
		t.Errorf("model calls reported while the call was in flight = %d, want 1", atDone)
	}
}
