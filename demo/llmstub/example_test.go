package llmstub_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/das-ask/ask/demo/llmstub"
)

// A stub with its own script, asked over plain HTTP as any OpenAI-compatible client would.
func Example() {
	script, err := llmstub.ParseScript([]byte(`
rules:
  - name: count
    pattern: '^how many (?P<what>\w+)\?$'
    steps:
      - tool: run_query
        args: {sql: "SELECT COUNT(*) FROM {{.Match.what}}"}
    final: "There are {{index .Last.rows 0 0}} {{.Match.what}}."
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	stub, err := llmstub.New(llmstub.Options{Script: script})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(stub.Handler())
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{
		"model": "llm-stub",
		"messages": [{"role": "user", "content": "How many teams?"}],
		"tools": [{"type": "function", "function": {"name": "run_query"}}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		fmt.Println(err)
		return
	}
	c := out.Choices[0]
	fmt.Println(c.FinishReason, c.Message.ToolCalls[0].Function.Name, c.Message.ToolCalls[0].Function.Arguments)
	fmt.Println(stub.Requests()[0].Rule, stub.Requests()[0].Decision)
	// Output:
	// tool_calls run_query {"sql":"SELECT COUNT(*) FROM teams"}
	// count tool_call
}
