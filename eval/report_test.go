package eval_test

import (
	"strings"
	"testing"

	"github.com/das-ask/ask/eval"
)

// The summary is what a terminal and CI show, with or without a report written: items that gave
// no outcome are explained there, each distinct reason once with how often and for which items,
// not left to "see the report".
func TestSummaryExplainsHarnessErrors(t *testing.T) {
	down := "creating the conversation: dial tcp 127.0.0.1:8080: connect: connection refused"
	res := []eval.ItemResult{
		{ID: "a", Expect: "answer", Got: "answer", TicketMS: 1, FirstMilestoneMS: 1, TerminalMS: 1, HasDone: true},
		{ID: "b", Expect: "answer", Got: "error", ErrorKind: "harness", Detail: down, TicketMS: -1, FirstMilestoneMS: -1, TerminalMS: -1},
		{ID: "c", Expect: "refusal", Got: "error", ErrorKind: "harness", Detail: down, TicketMS: -1, FirstMilestoneMS: -1, TerminalMS: -1},
		{ID: "d", Expect: "answer", Got: "error", ErrorKind: "harness", Detail: "following the events: client: no progress after 8 attempts", TicketMS: 2, FirstMilestoneMS: -1, TerminalMS: -1},
	}
	rep := &eval.Report{Target: "http://127.0.0.1:8080/ask", Model: "m", Set: eval.Set{Name: "t"}, Scores: eval.Score(res), Items: res}
	var b strings.Builder
	if err := rep.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"harness errors       3", "2× " + down + " (b, c)", "1× following the events: client: no progress after 8 attempts (d)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "see the report") {
		t.Errorf("summary points at a report that may not have been written:\n%s", b.String())
	}
}
