package client_test

import (
	"testing"

	"github.com/das-ask/ask/client"
)

// A long-poll caller gets the same Outcome as a stream's: Status's terminal event folded, its kind
// told apart without comparing strings; NotTerminal while the run is running.
func TestStatusOutcome(t *testing.T) {
	const head = `"ticket":"tk","conversation_id":"cv","created_at":"2026-11-29T20:00:00Z",`
	for _, tc := range []struct {
		name, body string
		kind       client.OutcomeKind
		steps      int64
	}{
		{"running", `{` + head + `"state":"running","last_seq":3}`, client.NotTerminal, 0},
		{"answer", `{` + head + `"state":"answer","last_seq":9,"terminal":` + evJSON(t, 8, "answer", map[string]any{"text": "42", "caveats": []any{}, "path": map[string]any{"speed": "full", "detail": "warehouse"}, "provenance": []any{}, "sql": []any{}, "divergence": nil}) +
			`,"done":` + evJSON(t, 9, "done", map[string]any{"outcome": "answer", "steps": 2, "model_calls": 2, "input_tokens": 1, "output_tokens": 1, "elapsed_ms": 1}) + `}`, client.Answer, 2},
		{"refusal", `{` + head + `"state":"refusal","last_seq":5,"terminal":` + evJSON(t, 4, "refusal", map[string]any{"source": "demo", "tool": "run_query", "reason": "no"}) +
			`,"done":` + evJSON(t, 5, "done", map[string]any{"outcome": "refusal", "steps": 1, "model_calls": 1, "input_tokens": 1, "output_tokens": 1, "elapsed_ms": 1}) + `}`, client.Refusal, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := fakeAPI(t, 200, "application/json", tc.body, nil)
			st, err := c.Status(t.Context(), "tk", 0)
			if err != nil {
				t.Fatal(err)
			}
			out, err := client.StatusOutcome(st)
			if err != nil || out.Kind != tc.kind || out.Done.Steps != tc.steps {
				t.Fatalf("got %v (%+v), %v; want %v with %d steps", out.Kind, out, err, tc.kind, tc.steps)
			}
			if tc.kind == client.Answer && (out.Answer == nil || out.Answer.Text != "42") {
				t.Errorf("answer %+v", out.Answer)
			}
			if tc.kind == client.Refusal && (out.Refusal == nil || out.Refusal.Source != "demo") {
				t.Errorf("refusal %+v", out.Refusal)
			}
		})
	}
}
