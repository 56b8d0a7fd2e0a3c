package llmstub_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/das-ask/ask/demo/llmstub"
)

func TestParseScriptErrors(t *testing.T) {
	tests := []struct {
		name, yaml, wantIn string
	}{
		{"empty", "", "empty"},
		{"unknown key", "rules:\n  - name: a\n    patern: x\n    final: y\n", "patern"},
		{"no name", "rules:\n  - pattern: x\n    final: y\n", "name is required"},
		{"no pattern", "rules:\n  - name: a\n    final: y\n", "pattern is required"},
		{"no final", "rules:\n  - name: a\n    pattern: x\n", "final is required"},
		{"bad pattern", "rules:\n  - name: a\n    pattern: '('\n    final: y\n", "pattern"},
		{"bad template", "rules:\n  - name: a\n    pattern: x\n    final: '{{.Match'\n", "final"},
		{"bad args template", "rules:\n  - name: a\n    pattern: x\n    final: y\n    steps:\n      - tool: t\n        args: {q: '{{'}\n", "args.q"},
		{"bad tool name", "rules:\n  - name: a\n    pattern: x\n    final: y\n    steps:\n      - tool: 'a b'\n", "tool"},
		{"bad delay", "rules:\n  - name: a\n    pattern: x\n    final: y\n    steps:\n      - tool: t\n        delay: soon\n", "delay"},
		{"negative delay", "rules:\n  - name: a\n    pattern: x\n    final: y\n    steps:\n      - tool: t\n        delay: -1s\n", "delay"},
		{"bad if_empty", "rules:\n  - name: a\n    pattern: x\n    final: y\n    steps:\n      - tool: t\n      - tool: u\n        if_empty: skip\n", "if_empty"},
		{"if_empty on the first step", "rules:\n  - name: a\n    pattern: x\n    final: y\n    steps:\n      - tool: t\n        if_empty: final\n", "previous step"},
		{"bad history role", "rules:\n  - name: a\n    pattern: x\n    final: y\n    from_history: {role: tool, pattern: z}\n", "from_history.role"},
		{"duplicate names", "rules:\n  - name: a\n    pattern: x\n    final: y\n  - name: a\n    pattern: z\n    final: y\n", "duplicate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := llmstub.ParseScript([]byte(tt.yaml))
			if err == nil || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("err %v, want one mentioning %q", err, tt.wantIn)
			}
		})
	}
}

func TestDefaultScriptParses(t *testing.T) {
	s, err := llmstub.DefaultScript()
	if err != nil {
		t.Fatalf("DefaultScript: %v", err)
	}
	if got := s.Models(); !reflect.DeepEqual(got, []string{"llm-stub"}) {
		t.Errorf("models %v", got)
	}
	if _, err := llmstub.ParseScript(llmstub.DefaultScriptYAML()); err != nil {
		t.Errorf("DefaultScriptYAML does not parse: %v", err)
	}
}

const customScript = `
fallback: "no idea"
rules:
  - name: lookup
    pattern: '^look up (\w+) as (?P<who>\w+)$'
    from_history:
      role: user
      pattern: 'my name is (?P<name>\w+)'
    steps:
      - tool: search_catalog
        args: {query: "{{index .Match \"1\"}}", by: "{{.Match.who}}", for: "{{.History.name}}", limit: 3, deep: true, tags: [a, "{{upper .Match.who}}"]}
    final: "{{json .Last}} {{json (index .Results 0)}}"
  - name: quote
    pattern: '^quote (.+)$'
    steps:
      - tool: run_query
        args: {sql: "SELECT {{sqlquote (index .Match \"1\")}} AS v"}
    final: done
  - name: broken
    pattern: '^broken$'
    final: "{{.Last.nothing}}"
`

// TestCustomScript covers what the default script does not use: numbered captures, a user-role
// from_history, non-string args, the json and upper functions, tool names prefixed by the agent,
// tools not offered, and a template that fails.
func TestCustomScript(t *testing.T) {
	script, err := llmstub.ParseScript([]byte(customScript))
	if err != nil {
		t.Fatal(err)
	}
	stub, srv := newStub(t, llmstub.Options{Script: script})
	client := newClient(srv.URL)
	tool := func(name string) openai.ChatCompletionToolUnionParam {
		return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: name})
	}
	history := []openai.ChatCompletionMessageParamUnion{
		openai.UserMessage("Hello, my name is Ada"), openai.AssistantMessage("Hello."),
	}
	params := func(question string, tools ...openai.ChatCompletionToolUnionParam) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "m", Tools: tools,
			Messages: append(append([]openai.ChatCompletionMessageParamUnion{}, history...), openai.UserMessage(question))}
	}

	t.Run("prefixed tool and args", func(t *testing.T) {
		p := params("look up widgets as bob", tool("demo__search_catalog"), tool("demo__run_query"))
		comp := complete(t, client, p, false)
		tc := comp.Choices[0].Message.ToolCalls
		if len(tc) != 1 || tc[0].Function.Name != "demo__search_catalog" {
			t.Fatalf("tool calls %+v, want demo__search_catalog", tc)
		}
		want := `{"by":"bob","deep":true,"for":"Ada","limit":3,"query":"widgets","tags":["a","BOB"]}`
		if tc[0].Function.Arguments != want {
			t.Errorf("arguments %s, want %s", tc[0].Function.Arguments, want)
		}
		p.Messages = append(p.Messages, comp.Choices[0].Message.ToParam(), openai.ToolMessage(`{"terms": [1, 2.50]}`, tc[0].ID))
		final := complete(t, client, p, false).Choices[0].Message.Content
		if want := `{"terms":[1,2.50]} {"terms":[1,2.50]}`; final != want {
			t.Errorf("final %q, want %q", final, want)
		}
	})
	t.Run("sqlquote escapes", func(t *testing.T) {
		comp := complete(t, client, params("quote it's'; DROP TABLE x; --", tool("run_query")), false)
		tc := comp.Choices[0].Message.ToolCalls
		if want := `{"sql":"SELECT 'it''s''; DROP TABLE x; --' AS v"}`; len(tc) != 1 || tc[0].Function.Arguments != want {
			t.Errorf("tool calls %+v, want arguments %s", tc, want)
		}
	})
	t.Run("tool not offered", func(t *testing.T) {
		comp := complete(t, client, params("look up widgets as bob", tool("run_query")), false)
		if msg := comp.Choices[0].Message; len(msg.ToolCalls) != 0 || msg.Content != "I can't answer that: the search_catalog tool is not available to me." {
			t.Errorf("reply %+v", msg)
		}
	})
	t.Run("a tool two sources offer", func(t *testing.T) {
		// Two sources with the same tools (two warehouses): the first offered is called, not none.
		for _, order := range [][]string{{"a__search_catalog", "b__search_catalog"}, {"b__search_catalog", "a__search_catalog"}} {
			comp := complete(t, client, params("look up widgets as bob", tool(order[0]), tool(order[1])), false)
			if tc := comp.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Name != order[0] {
				t.Errorf("offered %v: tool calls %+v, want one call of %s", order, tc, order[0])
			}
		}
	})
	t.Run("tool_choice none", func(t *testing.T) {
		p := params("look up widgets as bob", tool("search_catalog"))
		p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
		comp := complete(t, client, p, false)
		if msg := comp.Choices[0].Message; len(msg.ToolCalls) != 0 || !strings.Contains(msg.Content, "not available") {
			t.Errorf("reply %+v", msg)
		}
	})
	t.Run("fallback", func(t *testing.T) {
		comp := complete(t, client, params("something else", tool("search_catalog")), false)
		if msg := comp.Choices[0].Message; msg.Content != "no idea" || comp.Choices[0].FinishReason != "stop" {
			t.Errorf("reply %+v", msg)
		}
	})
	t.Run("no user message", func(t *testing.T) {
		p := openai.ChatCompletionNewParams{Model: "m",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("look up widgets as bob")}}
		if msg := complete(t, client, p, false).Choices[0].Message; msg.Content != "no idea" {
			t.Errorf("reply %+v", msg)
		}
	})
	t.Run("template fails", func(t *testing.T) {
		stub.Reset()
		resp := post(t, srv.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"broken"}]}`)
		if resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("status %d, want 500", resp.StatusCode)
		}
		if msg, typ, _, _ := apiErrorBody(t, resp); typ != "server_error" || !strings.Contains(msg, "broken") {
			t.Errorf("error %q %q", typ, msg)
		}
		if reqs := stub.Requests(); len(reqs) != 1 || reqs[0].Status != http.StatusInternalServerError || reqs[0].Rule != "broken" {
			t.Errorf("log %+v", reqs)
		}
	})
}
