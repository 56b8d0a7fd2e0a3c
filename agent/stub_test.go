package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
)

// These tests run the production OpenAI adapter against the llm-stub, and the agent against
// the demo source, both real servers on loopback, with real tokens from the dev IdP.

func TestStubAnswerOneFigure(t *testing.T) {
	s := newStack(t)
	a := s.agent(t, nil)
	const q = "How many sev1 incidents did we have in 2026-Q2?"
	rec := &recorder{}
	out := a.Run(t.Context(), s.request(t, "alice", q), rec)

	if out.Answer == nil {
		t.Fatalf("outcome = %s, want answer (%+v)", outcomeType(out), out.Error)
	}
	ans := out.Answer
	// Facts come from the tool results: the last query's rows, the statement that ran.
	if ans.Result == nil || !slices.Equal(ans.Result.Columns, []string{"sev1_incidents"}) || len(ans.Result.Rows) != 1 || len(ans.Result.Rows[0]) != 1 {
		t.Fatalf("result = %+v, want one row of sev1_incidents", ans.Result)
	}
	figure := fmt.Sprint(ans.Result.Rows[0][0])
	if ans.Headline == nil || ans.Headline.Label != "sev1_incidents" || fmt.Sprint(ans.Headline.Value) != figure {
		t.Errorf("headline = %+v, want {sev1_incidents %s}", ans.Headline, figure)
	}
	if len(ans.Sql) != 1 || !strings.Contains(ans.Sql[0], "severity = 'sev1'") || !strings.Contains(ans.Sql[0], "'2026-Q2'") {
		t.Errorf("sql = %q, want the one statement that ran", ans.Sql)
	}
	if ans.Path.Speed != gen.AnswerPathSpeedFull || ans.Path.Detail != "warehouse" {
		t.Errorf("path = %+v, want full/warehouse", ans.Path)
	}
	if len(ans.Provenance) != 1 || ans.Provenance[0].Term != "incident" || ans.Provenance[0].Kind != "glossary_term" ||
		ans.Provenance[0].Source != "Incident Management Policy v3, §2" || !strings.HasPrefix(ans.Provenance[0].Statement, "An unplanned interruption") {
		t.Errorf("provenance = %+v, want the catalog's definition of incident", ans.Provenance)
	}
	if len(ans.Caveats) != 2 || ans.Caveats[0].Term != "incident" || !strings.Contains(ans.Caveats[0].Text, "quarter they were opened") {
		t.Errorf("caveats = %+v, want incident's two caveats", ans.Caveats)
	}
	if want := "We had " + figure + " sev1 incidents in 2026-Q2."; ans.Text != want {
		t.Errorf("text = %q, want %q", ans.Text, want)
	}
	if ans.Divergence != nil {
		t.Errorf("divergence = %v, want null", ans.Divergence)
	}

	// Steps: one per tool call, each in the source's audit under the same call id, as alice.
	wantTools := []string{"search_catalog", "define_term", "describe_table", "run_query"}
	var tools []string
	audit := s.audit(t)
	for _, st := range rec.steps {
		tools = append(tools, st.Tool)
		if st.Source != "demo" || st.Refused || st.Error != nil || !strings.HasPrefix(st.CallId, "call_") {
			t.Errorf("step = %+v", st)
		}
		i := slices.IndexFunc(audit, func(e demoAudit) bool { return e.CallID == st.CallId })
		if i < 0 || audit[i].OID != "alice" || audit[i].Tool != st.Tool {
			t.Errorf("step %s (%s): no matching audit line as alice in %+v", st.CallId, st.Tool, audit)
		}
	}
	if !slices.Equal(tools, wantTools) {
		t.Errorf("steps = %v, want %v", tools, wantTools)
	}
	if got := rec.steps[3].Args["sql"]; got != ans.Sql[0] {
		t.Errorf("run_query step args sql = %v, want %q", got, ans.Sql[0])
	}

	// Milestones: phase from the tool's kind, subject in the catalog's vocabulary.
	wantMs := []gen.MilestoneBody{
		{Phase: gen.MilestonePhaseGrounding, Subject: "incident", Source: "demo"},
		{Phase: gen.MilestonePhaseGrounding, Subject: "incident", Source: "demo"},
		{Phase: gen.MilestonePhaseDiscovering, Subject: "incidents", Source: "demo"},
		{Phase: gen.MilestonePhaseQuerying, Subject: "incidents", Source: "demo"},
	}
	if !slices.Equal(rec.milestones, wantMs) {
		t.Errorf("milestones = %+v, want %+v", rec.milestones, wantMs)
	}

	// Usage: one model call per stub request, tokens as the stub counted them.
	reqs := s.stub.Requests()
	if rec.modelCalls() != 5 || len(rec.usage) != 5 || len(reqs) != 5 {
		t.Errorf("model calls = %d, returned = %d, stub requests = %d, want 5, 5 and 5", rec.modelCalls(), len(rec.usage), len(reqs))
	}
	if in, out := rec.tokens(); in <= 0 || out <= 0 {
		t.Errorf("tokens = %d in, %d out, want both > 0", in, out)
	}

	assertQuestionKept(t, s, rec, out, q)
}

func TestStubCatalogOnlyIsFast(t *testing.T) {
	s := newStack(t)
	rec := &recorder{}
	out := s.agent(t, nil).Run(t.Context(), s.request(t, "bob", "What does change failure rate mean?"), rec)
	if out.Answer == nil {
		t.Fatalf("outcome = %s, want answer", outcomeType(out))
	}
	ans := out.Answer
	if ans.Path.Speed != gen.AnswerPathSpeedFast || ans.Path.Detail != "catalog" {
		t.Errorf("path = %+v, want fast/catalog", ans.Path)
	}
	if ans.Sql == nil || len(ans.Sql) != 0 || ans.Result != nil || ans.Headline != nil {
		t.Errorf("sql = %#v, result = %v, headline = %v; want [] and none", ans.Sql, ans.Result, ans.Headline)
	}
	if len(ans.Provenance) != 1 || !strings.EqualFold(ans.Provenance[0].Term, "change failure rate") {
		t.Errorf("provenance = %+v, want change failure rate", ans.Provenance)
	}
	if !strings.Contains(ans.Text, ans.Provenance[0].Statement) {
		t.Errorf("text %q does not carry the definition %q", ans.Text, ans.Provenance[0].Statement)
	}
	for _, m := range rec.milestones {
		if m.Phase != gen.MilestonePhaseGrounding {
			t.Errorf("milestone %+v: a catalog-only run only grounds", m)
		}
	}
}

func TestStubRefusalForBobAnswerForAlice(t *testing.T) {
	s := newStack(t)
	a := s.agent(t, nil)
	const q = "What was the on-call pay per team in 2026-Q3?"

	rec := &recorder{}
	out := a.Run(t.Context(), s.request(t, "bob", q), rec)
	if out.Refusal == nil {
		t.Fatalf("bob: outcome = %s, want refusal", outcomeType(out))
	}
	last := rec.steps[len(rec.steps)-1]
	if !last.Refused || last.CallId != out.Refusal.CallId || last.Tool != out.Refusal.Tool || out.Refusal.Source != "demo" || out.Refusal.Reason == "" {
		t.Errorf("refusal = %+v, last step = %+v", out.Refusal, last)
	}
	for _, st := range rec.steps[:len(rec.steps)-1] {
		if st.Refused {
			t.Errorf("step %+v refused before the last", st)
		}
	}
	audit := s.audit(t)
	if i := slices.IndexFunc(audit, func(e demoAudit) bool { return e.CallID == out.Refusal.CallId }); i < 0 || !audit[i].Refused || audit[i].OID != "bob" {
		t.Errorf("no refused audit line for bob's call %s: %+v", out.Refusal.CallId, audit)
	}
	// The run ends at the refusal: the model is not asked to smooth it over.
	if n := len(s.stub.Requests()); n != len(rec.steps) {
		t.Errorf("stub requests = %d, want one per step (%d): no model call after the refusal", n, len(rec.steps))
	}
	assertQuestionKept(t, s, rec, out, q)

	rec = &recorder{}
	out = a.Run(t.Context(), s.request(t, "alice", q), rec)
	if out.Answer == nil || out.Answer.Result == nil || len(out.Answer.Result.Rows) == 0 {
		t.Fatalf("alice: outcome = %s, want an answer with rows", outcomeType(out))
	}
	if !slices.Equal(out.Answer.Result.Columns, []string{"team", "amount_eur"}) || out.Answer.Headline != nil {
		t.Errorf("result columns = %v, headline = %v; want team, amount_eur and no headline", out.Answer.Result.Columns, out.Answer.Headline)
	}
}

func TestStubAbstention(t *testing.T) {
	s := newStack(t)
	const q = "What is our customer churn rate?"
	rec := &recorder{}
	out := s.agent(t, nil).Run(t.Context(), s.request(t, "alice", q), rec)
	if out.Abstention == nil {
		t.Fatalf("outcome = %s, want abstention", outcomeType(out))
	}
	if !slices.Equal(out.Abstention.Terms, []string{"churn"}) {
		t.Errorf("terms = %v, want [churn]", out.Abstention.Terms)
	}
	if out.Abstention.Sources == nil || !slices.Equal(*out.Abstention.Sources, []string{"demo"}) {
		t.Errorf("sources = %v, want [demo]", out.Abstention.Sources)
	}
	if len(rec.steps) != 1 || rec.steps[0].Tool != "search_catalog" {
		t.Errorf("steps = %+v, want one catalog search", rec.steps)
	}
	assertQuestionKept(t, s, rec, out, q)
}

func TestStubFollowUpFromMemory(t *testing.T) {
	s := newStack(t)
	a := s.agent(t, nil)
	const q1 = "Which team had the most incidents in 2026-Q3?"
	first := a.Run(t.Context(), s.request(t, "alice", q1), &recorder{})
	if first.Answer == nil {
		t.Fatalf("first: outcome = %s, want answer", outcomeType(first))
	}
	team := fmt.Sprint(first.Answer.Result.Rows[0][0])
	if !strings.HasPrefix(first.Answer.Text, team+" had the most incidents") {
		t.Fatalf("first text = %q, want it to name %s", first.Answer.Text, team)
	}

	const q2 = "How many deployments did that team ship in 2026-Q3?"
	history := []ask.Turn{{Question: q1, Outcome: gen.EventTypeAnswer, Text: first.Answer.Text}}
	s.stub.Reset()
	out := a.Run(t.Context(), s.request(t, "alice", q2, history...), &recorder{})
	if out.Answer == nil {
		t.Fatalf("follow-up: outcome = %s, want answer", outcomeType(out))
	}
	if len(out.Answer.Sql) != 1 || !strings.Contains(out.Answer.Sql[0], "t.name = '"+team+"'") {
		t.Errorf("sql = %q, want the deployments of %s", out.Answer.Sql, team)
	}
	if !strings.HasPrefix(out.Answer.Text, team+" shipped ") {
		t.Errorf("text = %q, want %s's deployments", out.Answer.Text, team)
	}
	// The model really received the prior turn, in full, before the question.
	reqs := s.stub.Requests()
	if len(reqs) == 0 {
		t.Fatal("no stub requests")
	}
	var roles, texts []string
	for _, m := range reqs[0].Messages {
		roles = append(roles, m.Role)
		texts = append(texts, m.Content)
	}
	if !slices.Equal(roles, []string{"system", "user", "assistant", "user"}) || texts[1] != q1 || texts[2] != first.Answer.Text || texts[3] != q2 {
		t.Errorf("first model call's messages = %v %q, want system, q1, its answer, q2", roles, texts)
	}

	// Without the memory the same question cannot be resolved: nothing ran, nothing was defined.
	out = a.Run(t.Context(), s.request(t, "alice", q2), &recorder{})
	if out.Abstention == nil {
		t.Errorf("without history: outcome = %s, want abstention", outcomeType(out))
	}
}

func TestStubNoModelCallAfterCancel(t *testing.T) {
	s := newStack(t)
	a := s.agent(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Cancel as soon as the first model call has returned, i.e. between turns.
	rec := &recorder{onModelCall: func(n int) {
		if n == 1 {
			cancel()
		}
	}}
	out := a.Run(ctx, s.request(t, "alice", "How many sev1 incidents did we have in 2026-Q2?"), rec)
	if out.Error == nil || out.Error.Kind != gen.ErrorKindCancelled {
		t.Errorf("outcome = %s, want error cancelled", outcomeType(out))
	}
	if n := len(s.stub.Requests()); n != 1 {
		t.Errorf("stub requests = %d, want 1: no model call after cancel", n)
	}
	if len(rec.steps) != 0 {
		t.Errorf("steps = %+v, want none: the tool call asked for was not started after cancel", rec.steps)
	}
}

// assertQuestionKept checks the privacy promise for one run: the question is in no event, the
// outcome, or any log line, and neither is the bearer.
func assertQuestionKept(t *testing.T, s *stack, rec *recorder, out ask.Outcome, question string) {
	t.Helper()
	if strings.Contains(strings.ToLower(rec.eventsJSON(t, out)), strings.ToLower(question)) {
		t.Errorf("an event or the outcome carries the question")
	}
	s.assertNotLogged(t, "question", question)
	b, _ := json.Marshal(out)
	if strings.Contains(string(b), "eyJ") {
		t.Errorf("the outcome carries something like a JWT: %s", b)
	}
}
