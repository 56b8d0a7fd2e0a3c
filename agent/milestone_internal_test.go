package agent

import (
	"slices"
	"testing"

	ask "github.com/das-ask/ask"
)

func TestTablesOf(t *testing.T) {
	tests := map[string][]string{
		"SELECT COUNT(*) FROM incidents WHERE severity = 'sev1'":                             {"incidents"},
		"select t.name from incidents i join services s on s.id = i.service_id JOIN teams t": {"incidents", "services", "teams"},
		`SELECT * FROM "oncall_pay" p JOIN teams t ON t.id = p.team_id JOIN teams u`:         {"oncall_pay", "teams"},
		"SELECT 1": nil,
	}
	for sql, want := range tests {
		if got := tablesOf(sql); !slices.Equal(got, want) {
			t.Errorf("tablesOf(%q) = %v, want %v", sql, got, want)
		}
	}
}

func TestCleanSubject(t *testing.T) {
	l := newLedger(ask.Request{Question: "How many sev1 incidents did we have?"})
	tests := map[string]string{
		"incident":                                    "incident",
		"  change   failure rate ":                    "change failure rate",
		"how many SEV1 incidents did we have":         "",
		"x: how many sev1 incidents did we have":      "",
		"é" + string(slices.Repeat([]rune("a"), 100)): "é" + string(slices.Repeat([]rune("a"), maxSubject-1)),
	}
	for in, want := range tests {
		if got := l.clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSourceMessagesQuotingAQuestionAreWithheld(t *testing.T) {
	l := newLedger(ask.Request{Question: "How many sev1 incidents did we have?",
		History: []ask.Turn{{Question: "Which team owns checkout?"}}})
	tests := map[string]string{
		"identity bob may not read table oncall_pay":                    "identity bob may not read table oncall_pay",
		`no term "how many SEV1 incidents did we have"`:                 withheld,
		"refused: which team owns checkout is not a table":              withheld,
		"Which team owns checkout? How many sev1 incidents did we have": withheld,
	}
	for in, want := range tests {
		if got := l.shown(in); got != want {
			t.Errorf("shown(%q) = %q, want %q", in, got, want)
		}
	}
}
