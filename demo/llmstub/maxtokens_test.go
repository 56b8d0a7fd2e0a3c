package llmstub_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/das-ask/ask/demo/llmstub"
)

// The output cap cuts a reply as the real API does: the prose, or a tool call's arguments, end
// where the cap fell, and finish_reason is "length" — so an agent's handling of a cut reply
// runs against the stub. A reply within the cap is untouched.
func TestOutputCapCutsTheReply(t *testing.T) {
	const q = "How many sev1 incidents did we have in 2026-Q2?"
	_, srv := newStub(t, llmstub.Options{})
	client := newClient(srv.URL)
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "json", true: "stream"}[stream]
		t.Run(name+"/prose", func(t *testing.T) {
			params := openai.ChatCompletionNewParams{Model: "llm-stub", Messages: []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage("What is the meaning of churn?"), // off script: the fallback prose
			}, MaxCompletionTokens: openai.Int(4)}
			full := complete(t, client, openai.ChatCompletionNewParams{Model: params.Model, Messages: params.Messages}, stream)
			cut := complete(t, client, params, stream)
			whole, part := full.Choices[0].Message.Content, cut.Choices[0].Message.Content
			if full.Choices[0].FinishReason != "stop" || cut.Choices[0].FinishReason != "length" {
				t.Errorf("finish reasons %q and %q, want stop without the cap and length with it",
					full.Choices[0].FinishReason, cut.Choices[0].FinishReason)
			}
			if part == "" || len(part) >= len(whole) || !strings.HasPrefix(whole, part) {
				t.Errorf("cut prose %q is not a proper start of %q", part, whole)
			}
			if stream {
				return // the usage of a stream is checked elsewhere
			}
			if cut.Usage.CompletionTokens > 4 {
				t.Errorf("completion tokens %d, past the cap of 4", cut.Usage.CompletionTokens)
			}
		})
		t.Run(name+"/tool call", func(t *testing.T) {
			params := openai.ChatCompletionNewParams{Model: "llm-stub", Messages: []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage(q),
			}, Tools: demoTools(), MaxCompletionTokens: openai.Int(8)}
			cut := complete(t, client, params, stream)
			ch := cut.Choices[0]
			if ch.FinishReason != "length" || len(ch.Message.ToolCalls) != 1 {
				t.Fatalf("finish %q with %d tool calls, want length and the cut call", ch.FinishReason, len(ch.Message.ToolCalls))
			}
			if args := ch.Message.ToolCalls[0].Function.Arguments; json.Valid([]byte(args)) {
				t.Errorf("arguments %q are whole: the cap should have cut them", args)
			}
		})
	}
	// A cap below what the call's name costs leaves the name and no arguments; the usage still
	// says the cap, never more, as the real API's does.
	t.Run("usage of a call cut within its name", func(t *testing.T) {
		for _, stream := range []bool{false, true} {
			cut := complete(t, client, openai.ChatCompletionNewParams{Model: "llm-stub", Messages: []openai.ChatCompletionMessageParamUnion{
				openai.UserMessage(q),
			}, Tools: demoTools(), MaxCompletionTokens: openai.Int(3)}, stream)
			if cut.Choices[0].FinishReason != "length" || cut.Usage.CompletionTokens != 3 {
				t.Errorf("stream %v: finish %q, completion tokens %d, want length and the cap of 3", stream,
					cut.Choices[0].FinishReason, cut.Usage.CompletionTokens)
			}
		}
	})
	t.Run("within the cap", func(t *testing.T) {
		comp := complete(t, client, openai.ChatCompletionNewParams{Model: "llm-stub", Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage(q),
		}, Tools: demoTools(), MaxTokens: openai.Int(1024)}, false)
		if ch := comp.Choices[0]; ch.FinishReason != "tool_calls" || !json.Valid([]byte(ch.Message.ToolCalls[0].Function.Arguments)) {
			t.Errorf("finish %q: a reply within the cap must be whole", ch.FinishReason)
		}
	})
}
