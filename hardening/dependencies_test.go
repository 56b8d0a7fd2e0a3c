package hardening_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// A model call that gets no answer within ASK_LLM_TIMEOUT_S ends in error{model} saying that,
// not that the provider was unreachable or unreadable: it was reached, and said nothing. Both
// adapters: the OpenAI one against the llm-stub behind a proxy that holds the call, the
// Anthropic one against a server that sends the stream's first event and then nothing.
func TestModelCallTimeoutSaysSo(t *testing.T) {
	s := modelBehind(t, func(_ http.ResponseWriter, r *http.Request, _ []byte) bool {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			<-r.Context().Done() // the adapter gives up after its 1 s timeout
			return true
		}
		return false
	})
	if term := runFault(t, s, qSev1); term.Type != "error" || term.Kind != "model" || !strings.Contains(term.Message, "ASK_LLM_TIMEOUT_S") {
		t.Errorf("openai: %s/%s %q, want error/model naming the model call timeout", term.Type, term.Kind, term.Message)
	}

	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: "+anthropicStart+"\n\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(silent.Close)
	s, _ = startStack(t, stack.Options{Deadline: faultDeadline, Model: &agent.Config{
		LLM: agent.LLMAnthropic, BaseURL: silent.URL, APIKey: "sk-ant-k", Model: "claude-sonnet-4-5",
		Timeout: time.Second, MaxRetries: -1, MaxTokens: 1024, MaxModelCalls: 12,
	}})
	if term := runFault(t, s, qSev1); term.Type != "error" || term.Kind != "model" || !strings.Contains(term.Message, "ASK_LLM_TIMEOUT_S") {
		t.Errorf("anthropic: %s/%s %q, want error/model naming the model call timeout", term.Type, term.Kind, term.Message)
	}
}

// anthropicStart is a Messages stream's first event.
const anthropicStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":210,"output_tokens":1}}}`
