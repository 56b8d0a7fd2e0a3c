package llmstub_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"github.com/das-ask/ask/demo/llmstub"
)

const toolsJSON = `[{"type":"function","function":{"name":"search_catalog","parameters":{"type":"object"}}},
 {"type":"function","function":{"name":"define_term","parameters":{"type":"object"}}}]`

func post(t *testing.T, url, body string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// sseData returns the data payloads of an SSE body, checking each event is a lone data line.
func sseData(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("SSE line %q is not a data line", line)
		}
		out = append(out, data)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStreamWireFormat checks the raw SSE: chunk objects, the tool call's first delta, usage only
// when asked for (null on every chunk but the last), and [DONE] last.
func TestStreamWireFormat(t *testing.T) {
	_, srv := newStub(t, llmstub.Options{})
	for _, includeUsage := range []bool{false, true} {
		body := `{"model":"llm-stub","stream":true,` +
			`"messages":[{"role":"user","content":"` + qDefine + `"}],"tools":` + toolsJSON
		if includeUsage {
			body += `,"stream_options":{"include_usage":true}`
		}
		resp := post(t, srv.URL+"/v1/chat/completions", body+"}")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
			t.Errorf("Content-Type %q", ct)
		}
		data := sseData(t, resp)
		if len(data) < 4 || data[len(data)-1] != "[DONE]" {
			t.Fatalf("stream %q does not end in [DONE]", data)
		}
		chunks := data[:len(data)-1]
		var args strings.Builder
		var finish string
		var gotUsage map[string]int
		for i, d := range chunks {
			var c map[string]json.RawMessage
			if err := json.Unmarshal([]byte(d), &c); err != nil {
				t.Fatalf("chunk %d: %v", i, err)
			}
			if string(c["object"]) != `"chat.completion.chunk"` {
				t.Errorf("chunk %d object %s", i, c["object"])
			}
			u, hasUsage := c["usage"]
			if hasUsage != includeUsage {
				t.Errorf("chunk %d: usage present %v, want %v", i, hasUsage, includeUsage)
			}
			var choices []struct {
				Delta struct {
					Role      string `json:"role"`
					ToolCalls []struct {
						Index    *int   `json:"index"`
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			}
			if err := json.Unmarshal(c["choices"], &choices); err != nil {
				t.Fatalf("chunk %d choices: %v", i, err)
			}
			last := includeUsage && i == len(chunks)-1
			if last {
				if len(choices) != 0 {
					t.Errorf("usage chunk has %d choices, want 0", len(choices))
				}
				if err := json.Unmarshal(u, &gotUsage); err != nil {
					t.Fatalf("usage: %v", err)
				}
				continue
			}
			if hasUsage && string(u) != "null" {
				t.Errorf("chunk %d usage %s, want null before the last chunk", i, u)
			}
			if len(choices) != 1 {
				t.Fatalf("chunk %d: %d choices", i, len(choices))
			}
			ch := choices[0]
			if i == 0 {
				tc := ch.Delta.ToolCalls
				if ch.Delta.Role != "assistant" || len(tc) != 1 || tc[0].Index == nil || *tc[0].Index != 0 ||
					!strings.HasPrefix(tc[0].ID, "call_") || tc[0].Type != "function" || tc[0].Function.Name != "search_catalog" {
					t.Errorf("first chunk %s", d)
				}
			}
			for _, tc := range ch.Delta.ToolCalls {
				args.WriteString(tc.Function.Arguments)
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if got, want := args.String(), `{"query":"change failure rate"}`; got != want {
			t.Errorf("arguments %q, want %q", got, want)
		}
		if finish != "tool_calls" {
			t.Errorf("finish_reason %q, want tool_calls", finish)
		}
		if includeUsage && (gotUsage["prompt_tokens"] <= 0 || gotUsage["completion_tokens"] <= 0 ||
			gotUsage["total_tokens"] != gotUsage["prompt_tokens"]+gotUsage["completion_tokens"]) {
			t.Errorf("usage %v", gotUsage)
		}
	}
}

// TestDeterministic: the same request gets the same ids, arguments and usage, streamed or not.
func TestDeterministic(t *testing.T) {
	_, srv := newStub(t, llmstub.Options{})
	client := newClient(srv.URL)
	params := openai.ChatCompletionNewParams{Model: "llm-stub", Tools: demoTools(),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(qSev1)}}
	a := complete(t, client, params, false)
	b := complete(t, client, params, false)
	s := complete(t, client, params, true)
	if a.ID != b.ID || a.ID != s.ID || !strings.HasPrefix(a.ID, "chatcmpl-") {
		t.Errorf("ids %q %q %q", a.ID, b.ID, s.ID)
	}
	for _, c := range []openai.ChatCompletion{b, s} {
		if len(c.Choices) != 1 || len(c.Choices[0].Message.ToolCalls) != 1 {
			t.Fatalf("choices %+v", c.Choices)
		}
		got, want := c.Choices[0].Message.ToolCalls[0], a.Choices[0].Message.ToolCalls[0]
		if got.ID != want.ID || got.Function.Name != want.Function.Name || got.Function.Arguments != want.Function.Arguments {
			t.Errorf("tool call %+v, want %+v", got, want)
		}
		if c.Usage.PromptTokens != a.Usage.PromptTokens || c.Usage.CompletionTokens != a.Usage.CompletionTokens {
			t.Errorf("usage %+v, want %+v", c.Usage, a.Usage)
		}
	}
	if a.Usage.PromptTokens == 0 || a.Usage.TotalTokens != a.Usage.PromptTokens+a.Usage.CompletionTokens {
		t.Errorf("usage %+v", a.Usage)
	}
	// A longer conversation costs more prompt tokens.
	params.Messages = append([]openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief.")}, params.Messages...)
	if c := complete(t, client, params, false); c.Usage.PromptTokens <= a.Usage.PromptTokens {
		t.Errorf("prompt tokens %d with a system message, want more than %d", c.Usage.PromptTokens, a.Usage.PromptTokens)
	}
}

// TestStreamProse checks a streamed prose reply reassembles to the non-streamed text, multi-byte
// characters included, and that the prose repeats the tool result's numbers as sent.
func TestStreamProse(t *testing.T) {
	script, err := llmstub.ParseScript([]byte(`
rules:
  - name: pay
    pattern: pay
    steps:
      - tool: run_query
        args: {sql: SELECT 1}
    final: "{{range .Last.rows}}{{index . 0}} €{{index . 1}}; {{end}}"
`))
	if err != nil {
		t.Fatal(err)
	}
	_, srv := newStub(t, llmstub.Options{Script: script})
	msgs := `"messages":[{"role":"user","content":"pay?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"run_query","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"{\"rows\":[[\"Zürich Ops\",1234.50],[\"Data\",99]],\"columns\":[\"team\",\"amount_eur\"]}"}]`
	want := "Zürich Ops €1234.50; Data €99; "

	var plain struct {
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.NewDecoder(post(t, srv.URL+"/v1/chat/completions", `{"model":"m",`+msgs+`}`).Body).Decode(&plain); err != nil {
		t.Fatal(err)
	}
	if len(plain.Choices) != 1 || plain.Choices[0].Message.Content != want || plain.Choices[0].FinishReason != "stop" {
		t.Errorf("non-streamed reply %+v, want %q", plain, want)
	}

	var text bytes.Buffer
	pieces := 0
	for _, d := range sseData(t, post(t, srv.URL+"/v1/chat/completions", `{"model":"m","stream":true,`+msgs+`}`)) {
		if d == "[DONE]" {
			break
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				text.WriteString(*ch.Delta.Content)
				pieces++
			}
		}
	}
	if text.String() != want {
		t.Errorf("streamed text %q, want %q", text.String(), want)
	}
	if pieces < 2 {
		t.Errorf("prose came in %d piece(s); want it streamed in several", pieces)
	}
}
