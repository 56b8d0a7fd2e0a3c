package hardening_test

import (
	"strings"
	"testing"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/demo/stack"
)

// A reply the model could not finish — the output cap (ASK_LLM_MAX_TOKENS) cut it, as the
// llm-stub cuts it like the real API, finish_reason "length" — is the model failing, not its
// answer: the run ends in error{model} saying so, at once, with no further model call. It used
// to be taken as a finished turn: the definition question answered with half a sentence, the
// churn question abstained with a cut clarification, and a tool call whose arguments the cap
// cut went back to the model as its mistake (which then apologised, in an "answer").
func TestModelReplyCutAtTheOutputCap(t *testing.T) {
	// 20 tokens: every tool call of these questions fits but run_query's; no final prose does.
	s, _ := startStack(t, stack.Options{Deadline: faultDeadline, Model: &agent.Config{
		LLM: agent.LLMStub, MaxTokens: 20, MaxModelCalls: 12,
	}})
	for _, c := range []struct {
		name, q string
		calls   int // model calls, the cut one last
	}{
		{"final prose of an answer", qCFR, 3},
		{"final prose of an abstention", qChurn, 2},
		{"a tool call's arguments", qSev1, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := stubCalls(s)
			term := runFault(t, s, c.q)
			if term.Type != "error" || term.Kind != "model" || !strings.Contains(term.Message, "output token cap") {
				t.Errorf("%s/%s %q, want error/model naming the output token cap", term.Type, term.Kind, term.Message)
			}
			if n := stubCalls(s) - before; n != c.calls {
				t.Errorf("%d model calls, want %d: none after the cut reply", n, c.calls)
			}
		})
	}
}
