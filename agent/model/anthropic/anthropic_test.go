package anthropic_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/agent/model/anthropic"
	"github.com/das-ask/ask/agent/model/internal/replay"
)

// sse renders events as the Messages API streams them.
func sse(events ...string) replay.Response {
	var b strings.Builder
	for _, e := range events {
		var head struct{ Type string }
		json.Unmarshal([]byte(e), &head)
		b.WriteString("event: " + head.Type + "\ndata: " + e + "\n\n")
	}
	return replay.Response{Status: 200, Header: map[string]string{"Content-Type": "text/event-stream"}, Body: b.String()}
}

const (
	messageStart = `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":210,"output_tokens":1}}}`
	textStart    = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	textDelta    = `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me look that up."}}`
	stop0        = `{"type":"content_block_stop","index":0}`
	toolStart    = `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"search_catalog","input":{}}}`
	toolDelta1   = `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"query\": \"inci"}}`
	toolDelta2   = `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"dent\"}"}}`
	stop1        = `{"type":"content_block_stop","index":1}`
	toolUseDelta = `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":48}}`
	endTurnDelta = `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":12}}`
	refusalDelta = `{"type":"message_delta","delta":{"stop_reason":"refusal","stop_sequence":null},"usage":{"output_tokens":3}}`
	maxTokDelta  = `{"type":"message_delta","delta":{"stop_reason":"max_tokens","stop_sequence":null},"usage":{"output_tokens":1024}}`
	windowDelta  = `{"type":"message_delta","delta":{"stop_reason":"model_context_window_exceeded","stop_sequence":null},"usage":{"output_tokens":7}}`
	messageStop  = `{"type":"message_stop"}`
	overloaded   = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
)

var fast = model.RetryPolicy{MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond}

func newModel(t *testing.T, url string) *anthropic.Model {
	t.Helper()
	m, err := anthropic.New(anthropic.Options{BaseURL: url, Model: "claude-sonnet-4-5", APIKey: "sk-ant-test", Retry: fast, MaxTokens: 1024})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var conversation = model.Request{
	System: "be brief",
	Messages: []model.Message{
		{Role: model.RoleUser, Text: "Which team?"},
		{Role: model.RoleAssistant, Text: "Payments had the most incidents."},
		{Role: model.RoleUser, Text: "And deployments?"},
		{Role: model.RoleAssistant, Text: "Checking.", ToolCalls: []model.ToolCall{{ID: "toolu_00", Name: "run_query", Args: json.RawMessage(`{"sql":"SELECT 1"}`)}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "toolu_00", Content: "no such table", IsError: true}}},
	},
	Tools: []model.ToolSpec{{Name: "search_catalog", Description: "Search the catalog.", InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string"}}, "required": []any{"query"},
	}}},
}

func TestStreamedToolUseAndTheRequestSent(t *testing.T) {
	srv := replay.Start(t, sse(messageStart, textStart, textDelta, stop0, toolStart, toolDelta1, toolDelta2, stop1, toolUseDelta, messageStop))
	resp, err := newModel(t, srv.URL).Complete(t.Context(), conversation)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Let me look that up." || len(resp.ToolCalls) != 1 {
		t.Fatalf("response = %+v", resp)
	}
	tc := resp.ToolCalls[0]
	var args map[string]string
	if tc.ID != "toolu_01" || tc.Name != "search_catalog" || json.Unmarshal(tc.Args, &args) != nil || args["query"] != "incident" {
		t.Errorf("tool call = %+v (%s)", tc, tc.Args)
	}
	if resp.Usage != (model.Usage{InputTokens: 210, OutputTokens: 48}) {
		t.Errorf("usage = %+v", resp.Usage)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("requests = %d", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/messages" || r.Header.Get("Authorization") != "Bearer sk-ant-test" || r.Header.Get("Anthropic-Version") == "" {
		t.Errorf("request = %s key %q version %q", r.Path, r.Header.Get("Authorization"), r.Header.Get("Anthropic-Version"))
	}
	var body struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Stream    bool   `json:"stream"`
		System    []struct{ Type, Text string }
		Messages  []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string          `json:"type"`
				Text      string          `json:"text"`
				ID        string          `json:"id"`
				Name      string          `json:"name"`
				Input     json.RawMessage `json:"input"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
				IsError   bool            `json:"is_error"`
			} `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string         `json:"name"`
			Description string         `json:"description"`
			InputSchema map[string]any `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("body: %v\n%s", err, r.Body)
	}
	if body.Model != "claude-sonnet-4-5" || body.MaxTokens != 1024 || !body.Stream {
		t.Errorf("model %q max_tokens %d stream %v", body.Model, body.MaxTokens, body.Stream)
	}
	if len(body.System) != 1 || body.System[0].Text != "be brief" {
		t.Errorf("system = %+v", body.System)
	}
	var roles []string
	for _, m := range body.Messages {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "user,assistant,user,assistant,user" {
		t.Fatalf("roles = %v", roles)
	}
	if body.Messages[1].Content[0].Text != "Payments had the most incidents." {
		t.Errorf("prior assistant turn = %+v: it must be sent in full", body.Messages[1])
	}
	use := body.Messages[3].Content
	if len(use) != 2 || use[0].Text != "Checking." || use[1].Type != "tool_use" || use[1].ID != "toolu_00" || use[1].Name != "run_query" || string(use[1].Input) != `{"sql":"SELECT 1"}` {
		t.Errorf("assistant tool use = %+v", use)
	}
	res := body.Messages[4].Content
	if len(res) != 1 || res[0].Type != "tool_result" || res[0].ToolUseID != "toolu_00" || !res[0].IsError || !strings.Contains(string(res[0].Content), "no such table") {
		t.Errorf("tool result = %+v", res)
	}
	if len(body.Tools) != 1 || body.Tools[0].Name != "search_catalog" || body.Tools[0].Description != "Search the catalog." ||
		body.Tools[0].InputSchema["type"] != "object" || body.Tools[0].InputSchema["properties"] == nil {
		t.Errorf("tools = %+v", body.Tools)
	}
	if req, _ := body.Tools[0].InputSchema["required"].([]any); len(req) != 1 || req[0] != "query" {
		t.Errorf("input_schema.required = %v", body.Tools[0].InputSchema["required"])
	}
}

func TestOverloadedMidStreamThenSuccess(t *testing.T) {
	srv := replay.Start(t,
		sse(messageStart, textStart, textDelta, overloaded),
		sse(messageStart, textStart, textDelta, stop0, endTurnDelta, messageStop),
	)
	resp, err := newModel(t, srv.URL).Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Let me look that up." {
		t.Errorf("text = %q: the broken attempt's partial text must not leak in", resp.Text)
	}
	// Both attempts were billed: input counted twice.
	if resp.Usage.InputTokens != 420 || resp.Usage.OutputTokens != 13 {
		t.Errorf("usage = %+v, want both attempts", resp.Usage)
	}
	if reqs := srv.Requests(); len(reqs) != 2 || string(reqs[0].Body) != string(reqs[1].Body) {
		t.Errorf("requests = %d, want the same request twice", len(reqs))
	}
}

func TestRateLimitedThenSuccess(t *testing.T) {
	srv := replay.Start(t,
		replay.Response{Status: 429, Header: map[string]string{"Retry-After": "0"}, Body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your rate limit."}}`},
		replay.Response{Status: 529, Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		sse(messageStart, textStart, textDelta, stop0, endTurnDelta, messageStop),
	)
	resp, err := newModel(t, srv.URL).Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}})
	if err != nil || resp.Text != "Let me look that up." {
		t.Fatalf("resp = %+v, err = %v", resp, err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("requests = %d, want 3", n)
	}
}

func TestFailuresThatEndTheCall(t *testing.T) {
	tests := []struct {
		name      string
		responses []replay.Response
		want      model.Kind
		calls     int
	}{
		{"refusal stop reason", []replay.Response{sse(messageStart, textStart, textDelta, stop0, refusalDelta, messageStop)}, model.KindRefused, 1},
		// Cut mid-prose, and mid-way through a tool call's input: neither is a turn, nor retried.
		{"prose cut at max_tokens", []replay.Response{sse(messageStart, textStart, textDelta, stop0, maxTokDelta, messageStop)}, model.KindTruncated, 1},
		{"tool input cut at max_tokens", []replay.Response{sse(messageStart, textStart, textDelta, stop0, toolStart, toolDelta1, stop1, maxTokDelta, messageStop)}, model.KindTruncated, 1},
		{"context window full", []replay.Response{sse(messageStart, textStart, textDelta, stop0, windowDelta, messageStop)}, model.KindTruncated, 1},
		{"bad request", []replay.Response{{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"messages: field required"}}`}}, model.KindRejected, 1},
		{"overloaded every time", []replay.Response{sse(messageStart, overloaded), sse(messageStart, overloaded), sse(messageStart, overloaded)}, model.KindOverloaded, 3},
		{"stream cut short", []replay.Response{sse(messageStart, textStart, textDelta)}, model.KindTransport, 1},
		// The provider's hint in milliseconds, which the SDK reads first, is a hint too: longer than
		// the policy waits, the call fails at once rather than coming back early.
		{"rate limited for longer than a retry waits", []replay.Response{{Status: 429, Header: map[string]string{"retry-after-ms": "5000"},
			Body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`}}, model.KindRateLimited, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := replay.Start(t, tt.responses...)
			resp, err := newModel(t, srv.URL).Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}})
			if model.KindOf(err) != tt.want {
				t.Fatalf("err = %v, want kind %s", err, tt.want)
			}
			if resp.Text != "" || len(resp.ToolCalls) != 0 {
				t.Errorf("response = %+v: a failed turn must not carry prose", resp)
			}
			if n := len(srv.Requests()); n != tt.calls {
				t.Errorf("requests = %d, want %d", n, tt.calls)
			}
		})
	}
}

// A provider (or a gateway at the base URL) that echoes the request into its error body —
// type, message, anything — shows none of it: the error says only words of model.Vocabulary.
func TestErrorTextIsAFixedVocabulary(t *testing.T) {
	const secret = "zq-canary-question sk-ant-test"
	tests := []struct {
		name, body string
		status     int
		want       string
	}{
		{"unknown type quoting the request", `{"type":"error","error":{"type":"` + secret + `","message":"` + secret + `"}}`, 400, "model rejected (HTTP 400): provider error"},
		{"known type, quoting message", `{"type":"error","error":{"type":"invalid_request_error","message":"` + secret + `"}}`, 400, "model rejected (HTTP 400): invalid request"},
		{"unknown status", `{"type":"error","error":{"type":"` + secret + `","message":"x"}}`, 418, "model rejected (HTTP 418): provider error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := replay.Start(t, replay.Response{Status: tt.status, Body: tt.body})
			_, err := newModel(t, srv.URL).Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}})
			if err == nil || err.Error() != tt.want {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
	// Mid-stream, an error event of an unknown type.
	srv := replay.Start(t, sse(messageStart, `{"type":"error","error":{"type":"`+secret+`","message":"`+secret+`"}}`))
	_, err := newModel(t, srv.URL).Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}})
	if err == nil || strings.Contains(err.Error(), "zq-canary") || !strings.HasSuffix(err.Error(), ": provider error") {
		t.Fatalf("mid-stream err = %v, want only \"provider error\"", err)
	}
}

// A request the model's context window cannot hold says so, rather than "invalid request". The
// Messages API has no type of its own for it: the message's fixed opening decides; the rest of
// it (token counts here, but a provider's message may quote anything) is not shown.
func TestContextWindowFullSaysSo(t *testing.T) {
	srv := replay.Start(t, replay.Response{Status: 400, Body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 212345 tokens > 200000 maximum"}}`})
	_, err := newModel(t, srv.URL).Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}})
	if want := "model rejected (HTTP 400): the conversation filled the model's context window"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

type recordingTransport struct{ urls []string }

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.urls = append(rt.urls, r.URL.String())
	return nil, errors.New("not sent")
}

// The adapter is configured by its Options alone. The SDK's client reads ANTHROPIC_BASE_URL
// and ANTHROPIC_CUSTOM_HEADERS from the environment: with no base URL configured, the key and
// the question went to whatever ANTHROPIC_BASE_URL named.
func TestTheEnvironmentIsNotRead(t *testing.T) {
	elsewhere := replay.Start(t)
	t.Setenv("ANTHROPIC_BASE_URL", elsewhere.URL)
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Extra: zq-canary")

	rt := &recordingTransport{}
	m, err := anthropic.New(anthropic.Options{Model: "claude-sonnet-4-5", APIKey: "sk-ant-test", Retry: fast, HTTPClient: &http.Client{Transport: rt}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}}); model.KindOf(err) != model.KindTransport {
		t.Errorf("err = %v, want transport", err)
	}
	if want := []string{"https://api.anthropic.com/v1/messages"}; !slices.Equal(rt.urls, want) {
		t.Errorf("requests went to %q, want %q", rt.urls, want)
	}

	srv := replay.Start(t, sse(messageStart, textStart, textDelta, stop0, endTurnDelta, messageStop))
	if _, err := newModel(t, srv.URL).Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "q"}}}); err != nil {
		t.Fatal(err)
	}
	for k, v := range srv.Requests()[0].Header {
		if strings.Contains(strings.Join(v, ","), "zq-canary") {
			t.Errorf("header %s: %q came from the environment", k, v)
		}
	}
	if n := len(elsewhere.Requests()); n != 0 {
		t.Errorf("ANTHROPIC_BASE_URL got %d requests", n)
	}
}
