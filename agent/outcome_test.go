package agent_test

import (
	"strings"
	"testing"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/gen"
)

// A milestone is what a person could be told now: every tool call's milestone is emitted before
// its step, whatever the call's outcome (a refused call included).
func TestMilestonePrecedesItsStep(t *testing.T) {
	s := newStack(t)
	m := &scripted{script: []func(model.Request) (model.Response, error){
		call("c1", "search_catalog", map[string]any{"query": "incident"}),
		call("c2", "define_term", map[string]any{"term": "incident"}),
		call("c3", "run_query", map[string]any{"sql": "SELECT COUNT(*) AS n FROM incidents"}),
		call("c4", "run_query", map[string]any{"sql": "SELECT team_id, amount FROM oncall_pay"}),
	}}
	rec := &recorder{}
	out := s.agent(t, m).Run(t.Context(), s.request(t, "bob", "how many incidents?"), rec)
	if out.Refusal == nil {
		t.Fatalf("outcome = %s, want bob's refusal of oncall_pay", outcomeType(out))
	}
	var order []string
	for _, e := range rec.events {
		switch v := e.(type) {
		case gen.MilestoneBody:
			order = append(order, "milestone:"+string(v.Phase))
		case gen.StepBody:
			order = append(order, "step:"+v.Tool)
		}
	}
	want := []string{
		"milestone:grounding", "step:search_catalog",
		"milestone:grounding", "step:define_term",
		"milestone:querying", "step:run_query",
		"milestone:querying", "step:run_query",
	}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("events:\n got  %v\n want %v", order, want)
	}
}

// An abstention says truthfully what was tried, and carries the model's own words — a
// clarifying question a client can show — but never the question text, this ask's or an
// earlier turn's.
func TestAbstentionSaysWhatWasTriedAndWhatTheModelSaid(t *testing.T) {
	const clarify = "I can't tell which team you mean. Could you name the team?"
	tests := []struct {
		name     string
		script   []func(model.Request) (model.Response, error)
		question string
		history  []ask.Turn
		terms    []string
		sources  []string
		text     string // "" for no text
	}{
		{name: "no tool called, a clarifying question", question: "How many deployments did that team ship?",
			script: []func(model.Request) (model.Response, error){say(clarify)}, terms: []string{}, text: clarify},
		{name: "a catalog search that found nothing", question: "What is our customer churn rate?",
			script: []func(model.Request) (model.Response, error){
				call("c1", "search_catalog", map[string]any{"query": "churn"}), say("The catalog has no churn term."),
			}, terms: []string{"churn"}, sources: []string{"demo"}, text: "The catalog has no churn term."},
		{name: "the model repeats the question", question: "What is our customer churn rate?",
			script: []func(model.Request) (model.Response, error){say("You asked: what is our customer churn rate? I cannot say.")}, terms: []string{}},
		{name: "the model repeats an earlier question", question: "And last year?",
			history: []ask.Turn{{Question: "What is our customer churn rate?", Outcome: gen.EventTypeAbstention, Text: "abstained"}},
			script:  []func(model.Request) (model.Response, error){say("Earlier you asked “What is our customer churn rate?” — I still can't.")}, terms: []string{}},
		{name: "the model says nothing", question: "Hm?",
			script: []func(model.Request) (model.Response, error){say("  ")}, terms: []string{}},
	}
	s := newStack(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			out := s.agent(t, &scripted{script: tc.script}).Run(t.Context(), s.request(t, "alice", tc.question, tc.history...), rec)
			a := out.Abstention
			if a == nil {
				t.Fatalf("outcome = %s, want abstention", outcomeType(out))
			}
			if strings.Join(a.Terms, ",") != strings.Join(tc.terms, ",") || a.Terms == nil {
				t.Errorf("terms = %#v, want %#v", a.Terms, tc.terms)
			}
			var sources []string
			if a.Sources != nil {
				sources = *a.Sources
			}
			if strings.Join(sources, ",") != strings.Join(tc.sources, ",") {
				t.Errorf("sources = %v, want %v (exactly the sources called)", sources, tc.sources)
			}
			got := ""
			if a.Text != nil {
				got = *a.Text
			}
			if got != tc.text {
				t.Errorf("text = %q, want %q", got, tc.text)
			}
			body := rec.eventsJSON(t, out)
			for _, q := range append([]string{tc.question}, questions(tc.history)...) {
				if strings.Contains(strings.ToLower(body), strings.ToLower(strings.TrimRight(q, "?"))) {
					t.Errorf("an event carries the question %q: %s", q, body)
				}
			}
		})
	}
}

func questions(h []ask.Turn) []string {
	var out []string
	for _, t := range h {
		out = append(out, t.Question)
	}
	return out
}
