package llmstub_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/das-ask/ask/demo/llmstub"
)

// newStub starts a stub with the default script (unless opts sets one) on httptest.
func newStub(t *testing.T, opts llmstub.Options) (*llmstub.Stub, *httptest.Server) {
	t.Helper()
	stub, err := llmstub.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(stub.Handler())
	t.Cleanup(srv.Close)
	return stub, srv
}

// newClient is the official OpenAI client pointed at the stub, without retries so a test sees
// every response as it came.
func newClient(baseURL string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(baseURL + "/v1/"),
		option.WithAPIKey("test-key"),
		option.WithMaxRetries(0),
	}, opts...)...)
}

// demoTools are the demo source's tools as an agent would offer them.
func demoTools() []openai.ChatCompletionToolUnionParam {
	var tools []openai.ChatCompletionToolUnionParam
	for _, name := range []string{"search_catalog", "define_term", "list_tables", "describe_table", "run_query"} {
		tools = append(tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:        name,
			Description: openai.String("demo source tool " + name),
			Parameters:  shared.FunctionParameters{"type": "object"},
		}))
	}
	return tools
}

// call is one tool call the stub made, with its arguments decoded.
type call struct {
	Name string
	Args map[string]any
}

// source answers a tool call the way the agent would pass a source's result to the model: the
// result's JSON text, or for a failed call its error text.
type source func(name string, args map[string]any) string

// askResult is one ask run to its end.
type askResult struct {
	Calls    []call
	Final    string
	Messages []openai.ChatCompletionMessageParamUnion // everything sent, plus the final reply
}

// ask drives the stub through one question as an agent would: call the model, run each tool call
// against src, feed the results back, until the model answers in prose.
func ask(t *testing.T, client openai.Client, history []openai.ChatCompletionMessageParamUnion, question string, src source, stream bool) askResult {
	t.Helper()
	msgs := append(append([]openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You answer questions about engineering data using the tools."),
	}, history...), openai.UserMessage(question))
	var res askResult
	for turn := 0; turn < 10; turn++ {
		params := openai.ChatCompletionNewParams{Model: "llm-stub", Messages: msgs, Tools: demoTools()}
		comp := complete(t, client, params, stream)
		if len(comp.Choices) != 1 {
			t.Fatalf("turn %d: %d choices, want 1", turn, len(comp.Choices))
		}
		choice := comp.Choices[0]
		msgs = append(msgs, choice.Message.ToParam())
		if len(choice.Message.ToolCalls) == 0 {
			if choice.FinishReason != "stop" {
				t.Fatalf("turn %d: prose with finish_reason %q, want stop", turn, choice.FinishReason)
			}
			res.Final, res.Messages = choice.Message.Content, msgs
			return res
		}
		if choice.FinishReason != "tool_calls" {
			t.Fatalf("turn %d: tool call with finish_reason %q, want tool_calls", turn, choice.FinishReason)
		}
		for _, tc := range choice.Message.ToolCalls {
			var args map[string]any
			if err := json.Unmarshal([]byte(tc.Function.Arguments), &args); err != nil {
				t.Fatalf("turn %d: arguments of %s are not a JSON object: %v", turn, tc.Function.Name, err)
			}
			res.Calls = append(res.Calls, call{Name: tc.Function.Name, Args: args})
			msgs = append(msgs, openai.ToolMessage(src(tc.Function.Name, args), tc.ID))
		}
	}
	t.Fatalf("no final answer after 10 turns; calls: %v", res.Calls)
	return res
}

// complete makes one model call, streamed (and accumulated) or not.
func complete(t *testing.T, client openai.Client, params openai.ChatCompletionNewParams, stream bool) openai.ChatCompletion {
	t.Helper()
	if !stream {
		comp, err := client.Chat.Completions.New(t.Context(), params)
		if err != nil {
			t.Fatalf("chat completion: %v", err)
		}
		return *comp
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	s := client.Chat.Completions.NewStreaming(t.Context(), params)
	defer s.Close()
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		if !acc.AddChunk(s.Current()) {
			t.Fatalf("accumulator rejected a chunk")
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("chat completion stream: %v", err)
	}
	return acc.ChatCompletion
}

// demoSource is a fake demo source whose results are shaped like the tool contract. Its figures
// are parameters so tests can prove the prose repeats what the tools returned.
type demoSource struct {
	count    int      // the figure run_query returns for a COUNT(*) query
	topTeam  string   // the team a GROUP BY t.name query returns
	refuse   []string // tools that refuse (as the source does for bob)
	noTerms  bool     // search_catalog finds nothing
	queryErr bool     // run_query reports bad SQL
}

func (d demoSource) answer(name string, args map[string]any) string {
	for _, r := range d.refuse {
		if r == name {
			return "forbidden: you may not read table oncall_pay"
		}
	}
	var v any
	switch name {
	case "search_catalog":
		terms := []map[string]string{}
		if !d.noTerms {
			terms = append(terms, map[string]string{"term": fmt.Sprint(args["query"]), "summary": "a catalog term"})
		}
		v = map[string]any{"query": args["query"], "terms": terms}
	case "define_term":
		v = map[string]any{"term": args["term"], "definition": "the share of deployments that cause a failure in production",
			"source": "DORA", "kind": "glossary_term", "caveats": []string{"excludes rolled-back changes"}, "tables": []string{"deployments"}}
	case "list_tables":
		v = map[string]any{"tables": []map[string]string{{"name": "incidents", "description": "incidents"}}}
	case "describe_table":
		v = map[string]any{"table": args["table"], "columns": []map[string]string{{"name": "id", "type": "INTEGER", "description": "id"}}}
	case "run_query":
		if d.queryErr {
			return "SQL logic error: no such column: sevrity"
		}
		sql := fmt.Sprint(args["sql"])
		cols, rows := []string{"n"}, [][]any{{d.count}}
		switch {
		case strings.Contains(sql, "GROUP BY t.name"):
			cols, rows = []string{"team", "incidents"}, [][]any{{d.topTeam, d.count}}
		case strings.Contains(sql, "oncall_pay"):
			cols, rows = []string{"team", "amount_eur"}, [][]any{{"Data", 1200.5}, {"Payments", d.count}}
		}
		v = map[string]any{"sql": sql, "columns": cols, "rows": rows, "row_count": len(rows), "truncated": false}
	default:
		return "unknown tool " + name
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// inProcess is an http.RoundTripper that serves requests with a handler in the calling goroutine,
// so a test inside a synctest bubble has no real socket.
type inProcess struct{ h http.Handler }

func (p inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, req)
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	return rec.Result(), nil
}
