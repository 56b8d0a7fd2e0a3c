package eval_test

import (
	"testing"

	"github.com/das-ask/ask/eval"
)

func TestScoreArithmetic(t *testing.T) {
	yes, no := true, false
	r := func(id, cat, exp, got string, correct, attributed *bool, ticket, terminal float64) eval.ItemResult {
		return eval.ItemResult{ID: id, Category: cat, Expect: exp, Got: got, Correct: correct, Attributed: attributed,
			TicketMS: ticket, FirstMilestoneMS: -1, TerminalMS: terminal, HasDone: terminal >= 0, ModelCalls: 2, InputTokens: 100}
	}
	res := []eval.ItemResult{
		r("a", "x", "answer", "answer", &yes, &yes, 1, 10),
		r("b", "x", "answer", "answer", &no, &no, 2, 20),
		r("c", "x", "answer", "abstention", &no, nil, 3, 30),
		r("d", "y", "abstention", "abstention", nil, nil, 4, 40),
		r("e", "y", "refusal", "answer", nil, nil, 5, 50),
		{ID: "f", Category: "y", Expect: "refusal", Got: "error", ErrorKind: "harness", TicketMS: -1, FirstMilestoneMS: -1, TerminalMS: -1},
	}
	s := eval.Score(res)
	check := func(name string, got eval.Ratio, n, of int) {
		t.Helper()
		if got.N != n || got.Of != of || (of == 0) != (got.Value == nil) {
			t.Errorf("%s: got %d/%d (value %v), want %d/%d", name, got.N, got.Of, got.Value, n, of)
		}
	}
	check("outcome accuracy", s.OutcomeAccuracy, 3, 6)
	check("answer correctness", s.AnswerCorrectness, 1, 3)
	check("correct when answered", s.CorrectWhenAnswered, 1, 2)
	check("attribution", s.Attribution, 1, 2)
	check("caveats carried: nothing to score", s.CaveatsCarried, 0, 0)
	check("abstention precision", s.Abstention.Precision, 1, 2)
	check("abstention recall", s.Abstention.Recall, 1, 1)
	check("refusal precision: none given", s.Refusal.Precision, 0, 0)
	check("refusal recall", s.Refusal.Recall, 0, 2)
	if s.Confusion["refusal"]["error"] != 1 || s.Confusion["answer"]["abstention"] != 1 || s.Confusion["refusal"]["answer"] != 1 {
		t.Errorf("confusion: %v", s.Confusion)
	}
	if s.HarnessErrors != 1 {
		t.Errorf("harness errors: %d, want 1", s.HarnessErrors)
	}
	// Nearest rank over the five asks that were timed: p50 is the 3rd, p95 the 5th.
	if q := s.Latency.Terminal; q.N != 5 || *q.P50 != 30 || *q.P95 != 50 {
		t.Errorf("terminal quantiles: n %d p50 %v p95 %v", q.N, *q.P50, *q.P95)
	}
	if q := s.Latency.FirstMilestone; q.N != 0 || q.P50 != nil {
		t.Errorf("no milestone came: got %+v", q)
	}
	if s.PerAsk.Asks != 5 || s.PerAsk.ModelCalls != 2 || s.PerAsk.InputTokens != 100 {
		t.Errorf("per ask: %+v", s.PerAsk)
	}
	if len(s.Categories) != 2 || s.Categories[0].Name != "x" || s.Categories[0].AnswerCorrectness.N != 1 || s.Categories[1].OutcomeAccuracy.N != 1 {
		t.Errorf("categories: %+v", s.Categories)
	}
}

// An item that expects an error and for which the harness read no outcome (the service down,
// the stream cut) did not pass: nothing was seen to fail as the item expects. It counts as an
// error in the confusion matrix, as every harness error does, and not towards outcome accuracy.
func TestHarnessErrorIsNotTheExpectedError(t *testing.T) {
	res := []eval.ItemResult{
		{ID: "seen", Category: "x", Expect: "error", Got: "error", ErrorKind: "timeout", TicketMS: 1, FirstMilestoneMS: -1, TerminalMS: 5, HasDone: true},
		{ID: "unread", Category: "x", Expect: "error", Got: "error", ErrorKind: "harness", TicketMS: -1, FirstMilestoneMS: -1, TerminalMS: -1},
	}
	s := eval.Score(res)
	if got := s.OutcomeAccuracy; got.N != 1 || got.Of != 2 {
		t.Errorf("outcome accuracy %d/%d, want 1/2: an outcome the harness never read is not the one expected", got.N, got.Of)
	}
	if got := s.Categories[0].OutcomeAccuracy; got.N != 1 || got.Of != 2 {
		t.Errorf("category outcome accuracy %d/%d, want 1/2", got.N, got.Of)
	}
	if s.Confusion["error"]["error"] != 2 || s.HarnessErrors != 1 {
		t.Errorf("confusion %v, harness errors %d: want both in error×error, one a harness error", s.Confusion, s.HarnessErrors)
	}
}
