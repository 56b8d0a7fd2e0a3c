package client_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// evJSON is one event's data as the service writes it.
func evJSON(t testing.TB, seq int64, typ string, body map[string]any) string {
	t.Helper()
	m := map[string]any{
		"seq": seq, "ticket": "tk", "conversation_id": "cv", "ts": time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC), "type": typ,
	}
	for k, v := range body {
		m[k] = v
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sseFrame renders one event as the service frames it.
func sseFrame(t testing.TB, seq int64, typ string, body map[string]any) string {
	t.Helper()
	return fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", seq, typ, evJSON(t, seq, typ, body))
}

// script is a run's events 1..n: accepted, branch open, steps, a milestone, an answer, done.
func script(t testing.TB, steps int) []string {
	t.Helper()
	var out []string
	seq := int64(0)
	add := func(typ string, body map[string]any) {
		seq++
		out = append(out, sseFrame(t, seq, typ, body))
	}
	add("accepted", map[string]any{"question": "q?"})
	add("branch", map[string]any{"branch_id": "b1", "role": "supervisor", "state": "open"})
	for i := range steps {
		add("step", map[string]any{"call_id": fmt.Sprint("c", i), "tool": "run_query", "source": "demo", "args": map[string]any{}, "ms": 3, "refused": false})
	}
	add("milestone", map[string]any{"phase": "querying", "subject": "incidents", "source": "demo"})
	add("branch", map[string]any{"branch_id": "b1", "role": "supervisor", "state": "close"})
	add("answer", map[string]any{"text": "42", "caveats": []any{}, "path": map[string]any{"speed": "full", "detail": "warehouse"}, "provenance": []any{}, "sql": []any{"select 42"}, "divergence": nil})
	add("done", map[string]any{"outcome": "answer", "steps": steps, "model_calls": 2, "input_tokens": 10, "output_tokens": 5, "elapsed_ms": 100})
	return out
}

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
