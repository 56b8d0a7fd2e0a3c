package llmstub_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/das-ask/ask/demo/llmstub"
)

// The README questions, exactly as worded there.
const (
	qSev1       = "How many sev1 incidents did we have in 2026-Q2?"
	qMostTeam   = "Which team had the most incidents in 2026-Q3?"
	qFollowUp   = "How many deployments did that team ship in 2026-Q3?"
	qDefine     = "What does change failure rate mean?"
	qOncallPay  = "What was the on-call pay per team in 2026-Q3?"
	qChurn      = "What is our customer churn rate?"
	qTakeYourTm = "Take your time: how many sev1 incidents did we have in 2026-Q2?"
)

func toolNames(calls []call) []string {
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = c.Name
	}
	return names
}

// TestDefaultScriptQuestions steps every README question through the stub with the official client,
// feeding back results shaped like the tool contract, in both wire modes.
func TestDefaultScriptQuestions(t *testing.T) {
	sev1Calls := []call{
		{"search_catalog", map[string]any{"query": "incident"}},
		{"define_term", map[string]any{"term": "incident"}},
		{"describe_table", map[string]any{"table": "incidents"}},
		{"run_query", map[string]any{"sql": "SELECT COUNT(*) AS sev1_incidents FROM incidents WHERE severity = 'sev1' AND quarter = '2026-Q2'"}},
	}
	tests := []struct {
		name      string
		question  string
		src       demoSource
		wantTools []string
		wantCalls []call // checked exactly when set
		wantFinal string
	}{
		{name: "sev1 count", question: qSev1, src: demoSource{count: 42},
			wantCalls: sev1Calls, wantFinal: "We had 42 sev1 incidents in 2026-Q2."},
		{name: "sev1 count repeats the tool's figure", question: qSev1, src: demoSource{count: 7},
			wantCalls: sev1Calls, wantFinal: "We had 7 sev1 incidents in 2026-Q2."},
		{name: "question matched case-insensitively", question: strings.ToUpper(qSev1), src: demoSource{count: 3},
			wantTools: []string{"search_catalog", "define_term", "describe_table", "run_query"},
			wantFinal: "We had 3 sev1 incidents in 2026-Q2."},
		{name: "team with the most incidents", question: qMostTeam, src: demoSource{count: 57, topTeam: "Payments"},
			wantTools: []string{"search_catalog", "define_term", "list_tables", "run_query"},
			wantFinal: "Payments had the most incidents in 2026-Q3: 57."},
		{name: "catalog only: no query", question: qDefine, src: demoSource{},
			wantCalls: []call{
				{"search_catalog", map[string]any{"query": "change failure rate"}},
				{"define_term", map[string]any{"term": "change failure rate"}},
			},
			wantFinal: "change failure rate: the share of deployments that cause a failure in production"},
		{name: "on-call pay for alice", question: qOncallPay, src: demoSource{count: 980},
			wantTools: []string{"search_catalog", "define_term", "describe_table", "run_query"},
			wantFinal: "On-call pay per team in 2026-Q3: Data €1200.5, Payments €980."},
		{name: "on-call pay refused for bob", question: qOncallPay, src: demoSource{refuse: []string{"describe_table", "run_query"}},
			wantTools: []string{"search_catalog", "define_term", "describe_table"},
			wantFinal: "I'm sorry, I can't answer that: the describe_table call was not allowed or failed."},
		{name: "churn: nothing in the catalog, abstain", question: qChurn, src: demoSource{noTerms: true},
			wantCalls: []call{{"search_catalog", map[string]any{"query": "churn"}}},
			wantFinal: "I couldn't find churn in the catalog, so there is no agreed definition to compute it from. Which measure of churn do you mean?"},
		{name: "bad SQL: apologise", question: qSev1, src: demoSource{queryErr: true},
			wantTools: []string{"search_catalog", "define_term", "describe_table", "run_query"},
			wantFinal: "I'm sorry, I couldn't answer that: the run_query call failed."},
		{name: "no rule matches", question: "What's the weather like?", src: demoSource{},
			wantTools: []string{}, wantFinal: "I can't answer that question with the tools I have."},
	}
	for _, stream := range []bool{false, true} {
		for _, tt := range tests {
			name := tt.name
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				_, srv := newStub(t, llmstub.Options{})
				got := ask(t, newClient(srv.URL), nil, tt.question, tt.src.answer, stream)
				if tt.wantCalls != nil && !reflect.DeepEqual(got.Calls, tt.wantCalls) {
					t.Errorf("calls:\n got %v\nwant %v", got.Calls, tt.wantCalls)
				}
				if tt.wantTools != nil && !reflect.DeepEqual(toolNames(got.Calls), tt.wantTools) {
					t.Errorf("tools: got %v, want %v", toolNames(got.Calls), tt.wantTools)
				}
				if got.Final != tt.wantFinal {
					t.Errorf("final:\n got %q\nwant %q", got.Final, tt.wantFinal)
				}
			})
		}
	}
}

// TestFollowUpResolvedFromHistory asks "that team" after a first ask in the same conversation: the
// team must come from the prior assistant message the stub receives, whichever team that is.
func TestFollowUpResolvedFromHistory(t *testing.T) {
	for _, team := range []string{"Payments", "Storefront"} {
		t.Run(team, func(t *testing.T) {
			stub, srv := newStub(t, llmstub.Options{})
			client := newClient(srv.URL)
			first := ask(t, client, nil, qMostTeam, demoSource{count: 57, topTeam: team}.answer, false)
			// The service resends prior turns as question and answer prose.
			history := []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage(qMostTeam), openai.AssistantMessage(first.Final),
			}
			second := ask(t, client, history, qFollowUp, demoSource{count: 31}.answer, false)

			wantSQL := "SELECT COUNT(*) AS deployments FROM deployments d JOIN services s ON s.id = d.service_id " +
				"JOIN teams t ON t.id = s.team_id WHERE t.name = '" + team + "' AND d.quarter = '2026-Q3'"
			if n := len(second.Calls); n != 3 {
				t.Fatalf("calls: got %v, want search_catalog, define_term, run_query", second.Calls)
			}
			if got := second.Calls[2].Args["sql"]; got != wantSQL {
				t.Errorf("sql:\n got %q\nwant %q", got, wantSQL)
			}
			if want := team + " shipped 31 deployments in 2026-Q3."; second.Final != want {
				t.Errorf("final: got %q, want %q", second.Final, want)
			}
			// The stub really received the prior turn on every call of the second ask.
			for _, r := range stub.Requests() {
				if r.Rule != "deployments-of-that-team" {
					continue
				}
				if !hasMessage(r.Messages, "assistant", first.Final) {
					t.Errorf("request %d of the follow-up lacks the prior assistant turn", r.Seq)
				}
			}
		})
	}
}

// TestFollowUpWithoutHistory: with no prior turn naming a team, the stub says it cannot tell which
// team is meant and calls no tool.
func TestFollowUpWithoutHistory(t *testing.T) {
	histories := map[string][]openai.ChatCompletionMessageParamUnion{
		"no history": nil,
		"history without a team": {
			openai.UserMessage(qSev1), openai.AssistantMessage("We had 12 sev1 incidents in 2026-Q2."),
		},
		// The answer naming the team came after a later question; only messages before the
		// question count, and the team sentence is in a user message, not an assistant one.
		"team named only by the user": {
			openai.UserMessage("Payments had the most incidents, right?"),
			openai.AssistantMessage("I can't answer that question with the tools I have."),
		},
	}
	for name, history := range histories {
		t.Run(name, func(t *testing.T) {
			stub, srv := newStub(t, llmstub.Options{})
			got := ask(t, newClient(srv.URL), history, qFollowUp, demoSource{count: 31}.answer, false)
			if len(got.Calls) != 0 {
				t.Errorf("calls: got %v, want none", got.Calls)
			}
			if want := "I can't tell which team you mean. Could you name the team?"; got.Final != want {
				t.Errorf("final: got %q, want %q", got.Final, want)
			}
			reqs := stub.Requests()
			if len(reqs) != 1 || reqs[0].Decision != llmstub.DecisionNoHistory {
				t.Errorf("request log: got %+v, want one request decided %q", reqs, llmstub.DecisionNoHistory)
			}
		})
	}
}

func hasMessage(msgs []llmstub.Message, role, content string) bool {
	for _, m := range msgs {
		if m.Role == role && m.Content == content {
			return true
		}
	}
	return false
}
