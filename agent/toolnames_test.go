package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/demo/llmstub"
)

// oddSource is a real MCP server (the official SDK's, which lists names outside MCP's
// recommended alphabet as they are) offering tools under the names given, and recording the
// name of every call it receives.
type oddSource struct {
	mu    sync.Mutex
	calls []string
}

func (o *oddSource) start(t *testing.T, tools ...*mcp.Tool) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "odd", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	for _, tool := range tools {
		tool.InputSchema = map[string]any{"type": "object"}
		srv.AddTool(tool, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			o.mu.Lock()
			o.calls = append(o.calls, req.Params.Name)
			o.mu.Unlock()
			out := map[string]any{"sql": "SELECT 7", "columns": []any{"n"}, "rows": []any{[]any{7}}}
			if tool.Meta["ask/role"] == "catalog.define" {
				out = map[string]any{"term": "incident", "definition": "an unplanned outage"}
			}
			text, err := json.Marshal(out)
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: out}, nil
		})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}

func (o *oddSource) called() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := slices.Clone(o.calls)
	slices.Sort(out)
	return slices.Compact(out)
}

// checkedModel is m, checking every request as a provider would read it: each tool offered has a
// name the providers take, and each tool call in the conversation names a tool offered (a
// delegated call the supervisor was shown under a branch's name would not).
type checkedModel struct {
	m    model.Model
	mu   sync.Mutex
	errs []string
}

var providerName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func (c *checkedModel) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	offered := map[string]bool{}
	c.mu.Lock()
	for _, t := range req.Tools {
		offered[t.Name] = true
		if !providerName.MatchString(t.Name) {
			c.errs = append(c.errs, fmt.Sprintf("offered %q", t.Name))
		}
	}
	for _, m := range req.Messages {
		for _, tc := range m.ToolCalls {
			if !offered[tc.Name] {
				c.errs = append(c.errs, fmt.Sprintf("a call to %q among the messages, which is not offered", tc.Name))
			}
		}
	}
	c.mu.Unlock()
	return c.m.Complete(ctx, req)
}

// The names the model is given for the tools of TestOddToolNames. They are part of what is
// tested: the same configuration must give the same names in every run and every build (the
// prompts, and a provider's prompt cache, depend on them).
const (
	longSource    = "warehouse_eu_west_1_eu_west_1_eu_west_1_eu_west_1_eu_west_1_eu_west_1_" // 70 characters
	longTool      = "warehouse/run query — über incidents incidents incidents incidents incidents "
	longToolModel = "warehouse_run_query____ber_incidents_incidents_incident_9938fde2"
	longRunModel  = "warehouse_eu_west_1_eu_west_1_eu_west_1_eu_w__run_query_224ed7ed" // longSource's run_query
)

const oddScript = `
rules:
  - name: odd
    pattern: 'how many incidents'
    mode: goal
    steps:
      - tool: catalog_define
        args: {term: incident}
      - tool: donn_es_d_finir
        args: {term: incident}
      - tool: ` + longToolModel + `
        args: {sql: SELECT 7}
      - tool: run_query
        args: {sql: SELECT 7}
      - tool: ` + longRunModel + `
        args: {sql: SELECT 8}
    final: "There were {{index .Last.rows 0 0}} incidents."
`

// TestOddToolNames: sources whose tool names the providers would refuse — a dot, a slash,
// spaces, letters outside ASCII, 80 characters — and one whose configured name is 70 characters
// long, offering a run_query as the other does (so "<source>__run_query" is 81), are offered to
// the model under names the providers take, through the production OpenAI adapter against the
// llm-stub (which refuses any other name with a 400, as OpenAI and Anthropic do). The run
// answers, each source is called under its tools' own names, and the steps show those names and
// the sources' configured ones. Phase 2 too, where each branch names its source's tools alone
// and the supervisor is shown the branches' calls under its own names.
func TestOddToolNames(t *testing.T) {
	script, err := llmstub.ParseScript([]byte(oddScript))
	if err != nil {
		t.Fatal(err)
	}
	for _, phase := range []int{1, 2} {
		t.Run(fmt.Sprintf("phase %d", phase), func(t *testing.T) {
			stub, err := llmstub.New(llmstub.Options{Script: script})
			if err != nil {
				t.Fatal(err)
			}
			stubSrv := httptest.NewServer(stub.Handler())
			t.Cleanup(stubSrv.Close)
			var long, short oddSource
			longURL := long.start(t,
				&mcp.Tool{Name: "catalog.define", Meta: mcp.Meta{"ask/role": "catalog.define"}},
				&mcp.Tool{Name: "run_query"})
			shortURL := short.start(t,
				&mcp.Tool{Name: "run_query"},
				&mcp.Tool{Name: longTool, Meta: mcp.Meta{"ask/role": "query"}},
				&mcp.Tool{Name: "données.définir"})

			cfg := agent.DefaultConfig()
			cfg.BaseURL = stubSrv.URL + "/v1"
			m, err := cfg.NewModel(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			cm := &checkedModel{m: m}
			a, err := agent.New(agent.Options{Model: cm, Phase: phase, Sources: []agent.SourceConfig{
				{Name: longSource, URL: longURL + "/mcp"}, {Name: "b", URL: shortURL + "/mcp"},
			}})
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			out := a.Run(t.Context(), ask.Request{Ticket: "tkt_odd", ConversationID: "cnv_odd", Question: "How many incidents?",
				Identity: ask.Identity{OID: "alice", Token: "tok"}}, rec)
			if out.Answer == nil || out.Answer.Text != "There were 7 incidents." {
				var reqs []string
				for _, r := range stub.Requests() {
					reqs = append(reqs, fmt.Sprintf("%d %s %+v %s %q", r.Status, r.Decision, r.ToolCall, r.Error, r.Tools))
				}
				t.Fatalf("outcome %s %+v %+v, want the answer; the stub saw:\n%s", outcomeType(out), out.Answer, out.Error, strings.Join(reqs, "\n"))
			}
			for _, e := range cm.errs {
				t.Error(e)
			}
			if got, want := long.called(), []string{"catalog.define", "run_query"}; !slices.Equal(got, want) {
				t.Errorf("the long-named source was called as %q, want %q", got, want)
			}
			if got, want := short.called(), []string{"données.définir", "run_query", longTool}; !slices.Equal(got, want) {
				t.Errorf("source b was called as %q, want %q", got, want)
			}
			real := map[string][]string{longSource: long.called(), "b": short.called()}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.steps) == 0 {
				t.Fatal("no steps")
			}
			for _, s := range rec.steps {
				if !slices.Contains(real[s.Source], s.Tool) {
					t.Errorf("step %s/%q: not a tool the source was called as", s.Source, s.Tool)
				}
			}
		})
	}
}

// TestToolsInAllBounded: each source may list up to 128 tools, but a run offers the model every
// source's tools at once (phase 1's loop, phase 2's reconciliation), and OpenAI takes at most 128
// in one request. Sources offering more in all end the run in error{transport} saying so, before
// any model call: the stub, like OpenAI, would refuse the request with a 400, and the run would
// end in error{model} with nothing to say which configuration was at fault. 128 in all is asked.
func TestToolsInAllBounded(t *testing.T) {
	many := func(prefix string, n int) []*mcp.Tool {
		out := make([]*mcp.Tool, n)
		for i := range out {
			out[i] = &mcp.Tool{Name: fmt.Sprintf("%s_%d", prefix, i)}
		}
		return out
	}
	for _, tt := range []struct {
		name   string
		counts [2]int
		want   string
	}{
		{"129 in all", [2]int{100, 29}, "error:transport"},
		{"128 in all", [2]int{100, 28}, "abstention"},
	} {
		for _, phase := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s phase %d", tt.name, phase), func(t *testing.T) {
				stub, err := llmstub.New(llmstub.Options{})
				if err != nil {
					t.Fatal(err)
				}
				stubSrv := httptest.NewServer(stub.Handler())
				t.Cleanup(stubSrv.Close)
				var one, two oddSource
				cfg := agent.DefaultConfig()
				cfg.BaseURL = stubSrv.URL + "/v1"
				m, err := cfg.NewModel(nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				a, err := agent.New(agent.Options{Model: m, Phase: phase, Sources: []agent.SourceConfig{
					{Name: "one", URL: one.start(t, many("a", tt.counts[0])...) + "/mcp"},
					{Name: "two", URL: two.start(t, many("b", tt.counts[1])...) + "/mcp"},
				}})
				if err != nil {
					t.Fatal(err)
				}
				out := a.Run(t.Context(), ask.Request{Ticket: "tkt_many", ConversationID: "cnv_many", Question: "Anything?",
					Identity: ask.Identity{OID: "alice", Token: "tok"}}, &recorder{})
				if got := outcomeType(out); got != tt.want {
					t.Fatalf("outcome %s %+v, want %s", got, out.Error, tt.want)
				}
				reqs := stub.Requests()
				if out.Error != nil {
					if want := "sources: 129 tools in all, more than the 128 one model request may offer"; out.Error.Message != want {
						t.Errorf("message %q, want %q", out.Error.Message, want)
					}
					if len(reqs) != 0 {
						t.Errorf("%d model calls, want none", len(reqs))
					}
					return
				}
				for _, r := range reqs {
					if r.Status != http.StatusOK {
						t.Errorf("the stub answered %d: %s", r.Status, r.Error)
					}
				}
			})
		}
	}
}
