package llmstub_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/das-ask/ask/demo/llmstub"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLogsHoldNoQuestionOrKey: the stub logs each request, but never the question, the prose, the
// arguments or the bearer key.
func TestLogsHoldNoQuestionOrKey(t *testing.T) {
	var logs syncBuffer
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
	for what, secret := range map[string]string{
		"question": qMostTeam, "rejected question": qChurn, "prose": res.Final, "key": key,
		"arguments": "GROUP BY", "team": "Payments",
	} {
		if strings.Contains(out, secret) {
			t.Errorf("the %s appears in the logs:\n%s", what, out)
		}
	}
}
