package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/agent/model/internal/replay"
	"github.com/das-ask/ask/agent/model/openai"
)

const toolCallTurn = `{
  "id": "chatcmpl-1", "object": "chat.completion", "created": 1764400000, "model": "gpt-4o-mini",
  "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": null,
    "message": {"role": "assistant", "content": null, "refusal": null,
      "tool_calls": [{"id": "call_abc", "type": "function",
        "function": {"name": "run_query", "arguments": "{\"sql\":\"SELECT 1\"}"}}]}}],
  "usage": {"prompt_tokens": 120, "completion_tokens": 17, "total_tokens": 137}
}`

const proseTurn = `{
  "id": "chatcmpl-2", "object": "chat.completion", "created": 1764400001, "model": "gpt-4o-mini",
  "choices": [{"index": 0, "finish_reason": "stop", "logprobs": null,
    "message": {"role": "assistant", "content": "There were 3.", "refusal": null}}],
  "usage": {"prompt_tokens": 150, "completion_tokens": 6, "total_tokens": 156}
}`

const rateLimited = `{"error": {"message": "Rate limit reached", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}`

func newModel(t *testing.T, url string, retry model.RetryPolicy) *openai.Model {
	t.Helper()
	m, err := openai.New(openai.Options{BaseURL: url + "/v1", Model: "gpt-4o-mini", APIKey: "sk-test", Retry: retry, MaxTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var fast = model.RetryPolicy{MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}

// conversation is a second turn: a prior exchange, the question, a tool call and its result.
var conversation = model.Request{
	System: "be brief",
	Messages: []model.Message{
		{Role: model.RoleUser, Text: "Which team?"},
		{Role: model.RoleAssistant, Text: "Payments had the most incidents."},
		{Role: model.RoleUser, Text: "How many deployments did that team ship?"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "call_abc", Name: "run_query", Args: json.RawMessage(`{"sql":"SELECT 1"}`)}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "call_abc", Content: `{"rows":[[3]]}`}}},
	},
	Tools: []model.ToolSpec{{Name: "run_query", Description: "Run read-only SQL.", InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"sql": map[string]any{"type": "string"}}, "required": []any{"sql"},
	}}},
}

func TestToolCallTurnAndTheRequestSent(t *testing.T) {
	srv := replay.Start(t, replay.Response{Status: 200, Body: toolCallTurn})
	resp, err := newModel(t, srv.URL, fast).Complete(t.Context(), conversation)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "call_abc" || resp.ToolCalls[0].Name != "run_query" || string(resp.ToolCalls[0].Args) != `{"sql":"SELECT 1"}` {
		t.Errorf("tool calls = %+v", resp.ToolCalls)
	}
	if resp.Usage != (model.Usage{InputTokens: 120, OutputTokens: 17}) {
		t.Errorf("usage = %+v", resp.Usage)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("requests = %d, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("request = %s %s auth %q", r.Method, r.Path, r.Header.Get("Authorization"))
	}
	var body struct {
		Model               string `json:"model"`
		MaxCompletionTokens int    `json:"max_completion_tokens"`
		Messages            []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name        string         `json:"name"`
				Description string         `json:"description"`
				Parameters  map[string]any `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("body: %v\n%s", err, r.Body)
	}
	if body.Model != "gpt-4o-mini" || body.MaxCompletionTokens != 512 {
		t.Errorf("model = %q, max tokens = %d", body.Model, body.MaxCompletionTokens)
	}
	var roles []string
	for _, m := range body.Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,user,assistant,tool" {
		t.Fatalf("roles = %s", got)
	}
	if body.Messages[0].Content != "be brief" || body.Messages[2].Content != "Payments had the most incidents." || body.Messages[3].Content != "How many deployments did that team ship?" {
		t.Errorf("messages = %+v: the prior turns must be sent in full", body.Messages)
	}
	tc := body.Messages[4].ToolCalls
	if len(tc) != 1 || tc[0].ID != "call_abc" || tc[0].Type != "function" || tc[0].Function.Name != "run_query" || tc[0].Function.Arguments != `{"sql":"SELECT 1"}` {
		t.Errorf("assistant tool calls = %+v", tc)
	}
	if body.Messages[5].ToolCallID != "call_abc" || body.Messages[5].Content != `{"rows":[[3]]}` {
		t.Errorf("tool message = %+v", body.Messages[5])
	}
	if len(body.Tools) != 1 || body.Tools[0].Type != "function" || body.Tools[0].Function.Name != "run_query" ||
		body.Tools[0].Function.Description != "Run read-only SQL." || body.Tools[0].Function.Parameters["type"] != "object" {
		t.Errorf("tools = %+v", body.Tools)
	}
}

func TestToolErrorIsMarkedForTheModel(t *testing.T) {
	srv := replay.Start(t, replay.Response{Status: 200, Body: proseTurn})
	req := conversation
	req.Messages = append([]model.Message(nil), conversation.Messages...)
	req.Messages[4] = model.Message{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "call_abc", Content: "no such column: x", IsError: true}}}
	if _, err := newModel(t, srv.URL, fast).Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if body := string(srv.Requests()[0].Body); !strings.Contains(body, `"content":"Error: no such column: x"`) {
		t.Errorf("body = %s, want the tool error marked", body)
	}
}

func TestRateLimitedThenSuccess(t *testing.T) {
	srv := replay.Start(t,
		replay.Response{Status: 429, Body: rateLimited},
		replay.Response{Status: 503, Body: `{"error": {"message": "busy", "type": "server_error"}}`},
		replay.Response{Status: 200, Body: proseTurn},
	)
	resp, err := newModel(t, srv.URL, fast).Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "There were 3." || len(resp.ToolCalls) != 0 {
		t.Errorf("response = %+v", resp)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || string(reqs[0].Body) != string(reqs[2].Body) {
		t.Errorf("requests = %d, want 3 identical attempts", len(reqs))
	}
}

func TestRetriesEnd(t *testing.T) {
	tests := []struct {
		name      string
		responses []replay.Response
		ctx       func(context.Context) (context.Context, context.CancelFunc)
		wantKind  model.Kind
		wantCalls int
	}{
		{"bad request is not retried", []replay.Response{{Status: 400, Body: `{"error": {"message": "bad", "type": "invalid_request_error"}}`}}, nil, model.KindRejected, 1},
		{"bad key is not retried", []replay.Response{{Status: 401, Body: `{"error": {"message": "Incorrect API key", "type": "invalid_request_error"}}`}}, nil, model.KindRejected, 1},
		{"retries run out", []replay.Response{{Status: 500, Body: `{}`}, {Status: 500, Body: `{}`}, {Status: 500, Body: `{}`}}, nil, model.KindOverloaded, 3},
		{"no retry past the deadline", []replay.Response{{Status: 429, Header: map[string]string{"Retry-After": "30"}, Body: rateLimited}},
			func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(ctx, 10*time.Second)
			},
			model.KindRateLimited, 1},
		{"no retry past the deadline, in milliseconds", []replay.Response{{Status: 429, Header: map[string]string{"retry-after-ms": "30000"}, Body: rateLimited}},
			func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(ctx, 10*time.Second)
			},
			model.KindRateLimited, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := replay.Start(t, tt.responses...)
			ctx := t.Context()
			if tt.ctx != nil {
				var cancel context.CancelFunc
				ctx, cancel = tt.ctx(ctx)
				defer cancel()
			}
			policy := fast
			policy.MaxDelay = time.Minute
			_, err := newModel(t, srv.URL, policy).Complete(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}})
			var me *model.Error
			if !errors.As(err, &me) || me.Kind != tt.wantKind {
				t.Fatalf("err = %v, want kind %s", err, tt.wantKind)
			}
			if n := len(srv.Requests()); n != tt.wantCalls {
				t.Errorf("requests = %d, want %d", n, tt.wantCalls)
			}
		})
	}
}

func TestRefusalAndContentFilterAreErrors(t *testing.T) {
	refusal := strings.Replace(proseTurn, `"content": "There were 3.", "refusal": null`, `"content": null, "refusal": "I can't help with that."`, 1)
	filtered := strings.Replace(proseTurn, `"finish_reason": "stop"`, `"finish_reason": "content_filter"`, 1)
	for _, tt := range []struct {
		body string
		want model.Kind
	}{{refusal, model.KindRefused}, {filtered, model.KindContentFilter}} {
		srv := replay.Start(t, replay.Response{Status: 200, Body: tt.body})
		resp, err := newModel(t, srv.URL, fast).Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}})
		if model.KindOf(err) != tt.want {
			t.Errorf("err = %v, want kind %s", err, tt.want)
		}
		if resp.Text != "" || resp.Usage.InputTokens != 150 {
			t.Errorf("response = %+v, want no text and the usage counted", resp)
		}
		if n := len(srv.Requests()); n != 1 {
			t.Errorf("requests = %d, want 1: a refusal is not retried", n)
		}
	}
}

func TestUnreachableIsTransport(t *testing.T) {
	srv := replay.Start(t)
	url := srv.URL
	srv.Close()
	_, err := newModel(t, url, fast).Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}})
	if model.KindOf(err) != model.KindTransport {
		t.Errorf("err = %v, want transport", err)
	}
}

func TestCancelledIsTheContextError(t *testing.T) {
	srv := replay.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := newModel(t, srv.URL, fast).Complete(ctx, model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// A provider (or a gateway at the base URL) that echoes the request into its error body —
// message, type, code — shows none of it: the error says only words of model.Vocabulary.
func TestErrorTextIsAFixedVocabulary(t *testing.T) {
	const secret = "zq-canary-question sk-test"
	body := `{"error":{"message":"` + secret + `","type":"` + secret + `","code":"` + secret + `"}}`
	for _, tt := range []struct {
		status int
		want   string
	}{
		{400, "model rejected (HTTP 400): invalid request"},
		{401, "model rejected (HTTP 401): authentication failed"},
		{418, "model rejected (HTTP 418): provider error"},
	} {
		srv := replay.Start(t, replay.Response{Status: tt.status, Body: body})
		_, err := newModel(t, srv.URL, fast).Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}})
		if err == nil || err.Error() != tt.want {
			t.Errorf("HTTP %d: err = %v, want %q", tt.status, err, tt.want)
		}
	}
}

// A request the model's context window cannot hold (the conversation with a large tool result,
// say) says so, rather than "invalid request", which reads as a bug of ours. The provider's
// code decides; its message is not shown.
func TestContextWindowFullSaysSo(t *testing.T) {
	srv := replay.Start(t, replay.Response{Status: 400, Body: `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 312044 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`})
	_, err := newModel(t, srv.URL, fast).Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}})
	if want := "model rejected (HTTP 400): the conversation filled the model's context window"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

type recordingTransport struct{ urls []string }

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.urls = append(rt.urls, r.URL.String())
	return nil, errors.New("not sent")
}

// The adapter is configured by its Options alone. The SDK's client reads OPENAI_BASE_URL and
// OPENAI_CUSTOM_HEADERS (and OPENAI_ORG_ID, OPENAI_PROJECT_ID) from the environment: with no
// base URL configured, the key and the question went to whatever OPENAI_BASE_URL named.
func TestTheEnvironmentIsNotRead(t *testing.T) {
	elsewhere := replay.Start(t)
	t.Setenv("OPENAI_BASE_URL", elsewhere.URL+"/v1")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Extra: zq-canary")
	t.Setenv("OPENAI_ORG_ID", "org-zq-canary")
	t.Setenv("OPENAI_PROJECT_ID", "proj-zq-canary")

	rt := &recordingTransport{}
	m, err := openai.New(openai.Options{Model: "gpt-4o-mini", APIKey: "sk-test", Retry: fast, HTTPClient: &http.Client{Transport: rt}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}}); model.KindOf(err) != model.KindTransport {
		t.Errorf("err = %v, want transport", err)
	}
	if want := []string{"https://api.openai.com/v1/chat/completions"}; !slices.Equal(rt.urls, want) {
		t.Errorf("requests went to %q, want %q", rt.urls, want)
	}

	srv := replay.Start(t, replay.Response{Status: 200, Body: proseTurn})
	if _, err := newModel(t, srv.URL, fast).Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}}); err != nil {
		t.Fatal(err)
	}
	for k, v := range srv.Requests()[0].Header {
		if strings.Contains(strings.Join(v, ","), "zq-canary") {
			t.Errorf("header %s: %q came from the environment", k, v)
		}
	}
	if n := len(elsewhere.Requests()); n != 0 {
		t.Errorf("OPENAI_BASE_URL got %d requests", n)
	}
}
