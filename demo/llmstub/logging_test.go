package llmstub_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/internal/logtest"
)

// TestLogsHoldNoQuestionOrKey: the stub logs each request, but never the question, the prose, the
// arguments or the bearer key.
func TestLogsHoldNoQuestionOrKey(t *testing.T) {
	var logs logtest.Buffer
	_, srv := newStub(t, llmstub.Options{RequireAuth: true,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	const key = "sk-secret-test-key-1234"
	client := newClient(srv.URL, option.WithAPIKey(key))
	res := ask(t, client, nil, qMostTeam, demoSource{count: 57, topTeam: "Payments"}.answer, true)
	post(t, srv.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"robot","content":"`+qChurn+`"}]}`,
		"Authorization", "Bearer "+key)

	out := logs.String()
	if strings.Count(out, "\n") < len(res.Calls)+2 {
		t.Fatalf("expected a line per request, got:\n%s", out)
	}
	// The question, the rejected question, the prose, the key, the arguments and the team.
	logs.AssertAbsent(t, qMostTeam, qChurn, res.Final, key, "GROUP BY", "Payments")
}
