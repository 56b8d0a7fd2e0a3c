package llmstub_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/das-ask/ask/demo/llmstub"
)

// apiErrorBody decodes OpenAI's error shape, insisting on all four keys.
func apiErrorBody(t *testing.T, resp *http.Response) (message, typ string, param, code *string) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]map[string]json.RawMessage
	if err := json.Unmarshal(b, &body); err != nil || len(body) != 1 || body["error"] == nil {
		t.Fatalf("body %s is not {\"error\": {...}}", b)
	}
	e := body["error"]
	for _, k := range []string{"message", "type", "param", "code"} {
		if _, ok := e[k]; !ok {
			t.Errorf("error lacks %q: %s", k, b)
		}
	}
	if err := json.Unmarshal(e["message"], &message); err != nil || message == "" {
		t.Errorf("message %s", e["message"])
	}
	_ = json.Unmarshal(e["type"], &typ)
	_ = json.Unmarshal(e["param"], &param)
	_ = json.Unmarshal(e["code"], &code)
	return message, typ, param, code
}

func TestMalformedRequests(t *testing.T) {
	const user = `{"role":"user","content":"hi"}`
	const asstCall = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"run_query","arguments":"{}"}}]}`
	tests := []struct {
		name      string
		body      string
		wantParam string // "" means null
		wantCode  string // "" means null
		wantIn    string // a fragment of the message
	}{
		{"not JSON", `{"model":`, "", "", "could not parse the JSON body"},
		{"no model", `{"messages":[` + user + `]}`, "", "", "must provide a model"},
		{"no messages", `{"model":"m"}`, "messages", "missing_required_parameter", "'messages'"},
		{"empty messages", `{"model":"m","messages":[]}`, "messages", "empty_array", "empty array"},
		{"messages not a list", `{"model":"m","messages":"hi"}`, "messages", "invalid_type", "Invalid type"},
		{"unknown role", `{"model":"m","messages":[{"role":"robot","content":"x"}]}`, "messages[0].role", "invalid_value", "'robot'"},
		{"no role", `{"model":"m","messages":[{"content":"x"}]}`, "messages[0].role", "missing_required_parameter", "role"},
		{"user without content", `{"model":"m","messages":[{"role":"user"}]}`, "messages[0].content", "missing_required_parameter", "content"},
		{"content of a wrong type", `{"model":"m","messages":[{"role":"user","content":42}]}`, "messages[0].content", "invalid_type", "content"},
		{"assistant with neither content nor tool calls", `{"model":"m","messages":[` + user + `,{"role":"assistant"}]}`,
			"messages.[1].content", "", "content"},
		{"tool answer to an unknown call", `{"model":"m","messages":[` + user + `,` + asstCall +
			`,{"role":"tool","tool_call_id":"call_b","content":"{}"}]}`, "messages.[2].role", "", "must be a response to a preceeding message"},
		{"tool answer with no tool call before it", `{"model":"m","messages":[` + user +
			`,{"role":"tool","tool_call_id":"call_a","content":"{}"}]}`, "messages.[1].role", "", "must be a response to a preceeding message"},
		{"tool call answered twice", `{"model":"m","messages":[` + user + `,` + asstCall +
			`,{"role":"tool","tool_call_id":"call_a","content":"{}"},{"role":"tool","tool_call_id":"call_a","content":"{}"}]}`,
			"messages.[3].role", "", "must be a response to a preceeding message"},
		{"tool call answered after another message", `{"model":"m","messages":[` + user + `,` + asstCall + `,` + user +
			`,{"role":"tool","tool_call_id":"call_a","content":"{}"}]}`, "messages.[1].role", "", "did not have response messages: call_a"},
		{"tool call never answered", `{"model":"m","messages":[` + user + `,` + asstCall + `]}`,
			"messages.[1].role", "", "did not have response messages: call_a"},
		{"tool message without tool_call_id", `{"model":"m","messages":[` + user + `,` + asstCall +
			`,{"role":"tool","content":"{}"}]}`, "messages[2].tool_call_id", "missing_required_parameter", "tool_call_id"},
		{"tool call without id", `{"model":"m","messages":[` + user +
			`,{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
			"messages[1].tool_calls[0].id", "missing_required_parameter", "id"},
		{"stream_options without stream", `{"model":"m","stream_options":{"include_usage":true},"messages":[` + user + `]}`,
			"stream_options", "invalid_value", "only allowed when 'stream' is enabled"},
		{"tool_choice without tools", `{"model":"m","tool_choice":"auto","messages":[` + user + `]}`, "tool_choice", "", "only allowed when 'tools'"},
		{"output cap of zero", `{"model":"m","max_completion_tokens":0,"messages":[` + user + `]}`,
			"max_completion_tokens", "integer_below_min_value", "Expected a value >= 1"},
		{"legacy output cap below one", `{"model":"m","max_tokens":-5,"messages":[` + user + `]}`,
			"max_tokens", "integer_below_min_value", "Expected a value >= 1"},
		{"bad function name", `{"model":"m","tools":[{"type":"function","function":{"name":"no spaces"}}],"messages":[` + user + `]}`,
			"tools[0].function.name", "invalid_value", "does not match pattern"},
		{"a dot in a function name", `{"model":"m","tools":[{"type":"function","function":{"name":"catalog.search"}}],"messages":[` + user + `]}`,
			"tools[0].function.name", "invalid_value", "does not match pattern"},
		{"function name of 65 characters", `{"model":"m","tools":[{"type":"function","function":{"name":"ok"}},{"type":"function","function":{"name":"` +
			strings.Repeat("a", 65) + `"}}],"messages":[` + user + `]}`,
			"tools[1].function.name", "string_above_max_length", "maximum length 64, but got a string with length 65"},
		{"129 tools", `{"model":"m","tools":[` + functions(129) + `],"messages":[` + user + `]}`,
			"tools", "array_above_max_length", "maximum length 128, but got an array with length 129"},
	}
	stub, srv := newStub(t, llmstub.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stub.Reset()
			resp := post(t, srv.URL+"/v1/chat/completions", tt.body)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400", resp.StatusCode)
			}
			msg, typ, param, code := apiErrorBody(t, resp)
			if typ != "invalid_request_error" {
				t.Errorf("type %q", typ)
			}
			if got := deref(param); got != tt.wantParam || (tt.wantParam == "") != (param == nil) {
				t.Errorf("param %v, want %q", got, tt.wantParam)
			}
			if got := deref(code); got != tt.wantCode || (tt.wantCode == "") != (code == nil) {
				t.Errorf("code %v, want %q", got, tt.wantCode)
			}
			if !strings.Contains(msg, tt.wantIn) {
				t.Errorf("message %q lacks %q", msg, tt.wantIn)
			}
			reqs := stub.Requests()
			if len(reqs) != 1 || reqs[0].Status != http.StatusBadRequest || reqs[0].Error != msg || reqs[0].Decision != "" {
				t.Errorf("request log %+v, want the one rejected request", reqs)
			}
		})
	}
}

// The bounds themselves are accepted: 128 tools, a name of 64 characters.
func TestToolBoundsAccepted(t *testing.T) {
	_, srv := newStub(t, llmstub.Options{})
	body := `{"model":"m","tools":[` + functions(127) + `,{"type":"function","function":{"name":"` + strings.Repeat("A-z_9", 12) + `abcd"}}],` +
		`"messages":[{"role":"user","content":"hi"}]}`
	resp := post(t, srv.URL+"/v1/chat/completions", body)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, want 200: %s", resp.StatusCode, b)
	}
}

// functions is n function tools, f0 to f<n-1>, as JSON array elements.
func functions(n int) string {
	fs := make([]string, n)
	for i := range fs {
		fs[i] = fmt.Sprintf(`{"type":"function","function":{"name":"f%d"}}`, i)
	}
	return strings.Join(fs, ",")
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// TestClientSeesAPIError: the official client decodes the stub's 400 into its *openai.Error.
func TestClientSeesAPIError(t *testing.T) {
	_, srv := newStub(t, llmstub.Options{})
	client := newClient(srv.URL)
	_, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model: "llm-stub",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.UserMessage("hi"),
			openai.ToolMessage("{}", "call_nobody_made"),
		},
	})
	var apierr *openai.Error
	if !errors.As(err, &apierr) {
		t.Fatalf("err %v, want *openai.Error", err)
	}
	if apierr.StatusCode != http.StatusBadRequest || apierr.Type != "invalid_request_error" || apierr.Param != "messages.[1].role" {
		t.Errorf("error %d %q %q", apierr.StatusCode, apierr.Type, apierr.Param)
	}
}

func TestAuth(t *testing.T) {
	_, srv := newStub(t, llmstub.Options{RequireAuth: true})
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for name, header := range map[string][]string{
		"no header":    nil,
		"empty bearer": {"Authorization", "Bearer "},
		"basic":        {"Authorization", "Basic dXNlcjpwYXNz"},
	} {
		t.Run(name, func(t *testing.T) {
			resp := post(t, srv.URL+"/v1/chat/completions", body, header...)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
			if msg, _, _, _ := apiErrorBody(t, resp); !strings.Contains(msg, "API key") {
				t.Errorf("message %q", msg)
			}
		})
	}
	if resp := post(t, srv.URL+"/v1/chat/completions", body, "Authorization", "Bearer anything"); resp.StatusCode != http.StatusOK {
		t.Errorf("with a key: status %d, want 200", resp.StatusCode)
	}
	withKey, withoutKey := newClient(srv.URL), newClient(srv.URL, option.WithAPIKey(""))
	models, err := withKey.Models.List(t.Context())
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != "llm-stub" {
		t.Errorf("models with a key: %v, %v", models, err)
	}
	_, err = withoutKey.Models.List(t.Context())
	var apierr *openai.Error
	if !errors.As(err, &apierr) || apierr.StatusCode != http.StatusUnauthorized {
		t.Errorf("models without a key: %v, want 401", err)
	}
}

func TestUnknownPath(t *testing.T) {
	_, srv := newStub(t, llmstub.Options{})
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/v1/chat/completions"},
		{http.MethodPost, "/v1/completions"},
		{http.MethodGet, "/"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), tc.method, srv.URL+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s: status %d, want 404", tc.method, tc.path, resp.StatusCode)
		}
		if msg, _, _, _ := apiErrorBody(t, resp); msg != "Invalid URL ("+tc.method+" "+tc.path+")" {
			t.Errorf("message %q", msg)
		}
		resp.Body.Close()
	}
}
