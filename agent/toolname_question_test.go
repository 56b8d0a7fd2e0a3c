package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/agent/source"
	"github.com/das-ask/ask/gen"
)

// TestToolNamedWithTheQuestionIsWithheld: a tool's name is the source's own text, and a source
// may list tools named after what it was sent ("saved searches" named with an earlier question,
// found by a security audit). The model may call one; the call is made under its real name,
// but no step, refusal, error, log line or trace shows a name holding a question, the current
// one or an earlier turn's: the step's tool reads "[the question]", and a transport failure's
// message (the run's error, the step's error, the source's warning) names it so too. Before,
// the name reached the events, the webhook body, the log and the tool-call metric's labels.
func TestToolNamedWithTheQuestionIsWithheld(t *testing.T) {
	const earlier = "Is the Hooli acquisition closing on March 3"
	okName, brokenName, deniedName := "saved: "+earlier, "recent: "+earlier, "denied: "+earlier

	srv := mcp.NewServer(&mcp.Implementation{Name: "saved", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	var called []string
	for _, name := range []string{okName, brokenName} {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				called = append(called, req.Params.Name)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "no saved results"}}}, nil
			})
	}
	srv.AddTool(&mcp.Tool{Name: deniedName, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "not yours"}},
				Meta: mcp.Meta{source.MetaRefusal: map[string]any{"code": "forbidden", "reason": "not yours"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if strings.Contains(string(b), `"tools/call"`) && strings.Contains(string(b), "recent: ") {
			http.Error(w, "broken", http.StatusInternalServerError) // a transport failure
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)

	// The model calls the tool offered under each name in turn (its model name is sanitized).
	callNamed := func(id, prefix string) func(model.Request) (model.Response, error) {
		return func(req model.Request) (model.Response, error) {
			for _, spec := range req.Tools {
				if strings.HasPrefix(spec.Name, prefix) {
					return call(id, spec.Name, map[string]any{})(req)
				}
			}
			return model.Response{Text: "no tool " + prefix}, nil
		}
	}
	m := &scripted{script: []func(model.Request) (model.Response, error){
		callNamed("c1", "saved"),
		callNamed("c2", "recent"),
		say("must not be asked"),
	}}
	var logs bytes.Buffer
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	a, err := agent.New(agent.Options{Model: m, Sources: []agent.SourceConfig{{Name: "saved", URL: hs.URL + "/mcp"}},
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	out := a.Run(t.Context(), ask.Request{Ticket: "tkt_saved", ConversationID: "cnv_saved", Question: "What did the board decide about it?",
		History:  []ask.Turn{{Question: earlier, Outcome: gen.EventTypeAbstention, Text: "I could not tell."}},
		Identity: ask.Identity{OID: "alice", Token: "tok"}}, rec)

	if len(called) != 1 || called[0] != okName {
		t.Errorf("the source was called as %q, want the tool's real name %q (the other call failed in transport)", called, okName)
	}
	if out.Error == nil || out.Error.Kind != gen.ErrorKindTransport {
		t.Fatalf("outcome %s %+v, want error{transport} from the broken tool", outcomeType(out), out.Error)
	}
	rec.mu.Lock()
	steps := rec.steps
	rec.mu.Unlock()
	if len(steps) != 2 || steps[0].Tool != "[the question]" || steps[1].Tool != "[the question]" || steps[1].Error == nil {
		t.Fatalf("steps %+v, want two, each tool shown as [the question], the second with its error", steps)
	}
	leaks := func(where, s string) {
		if strings.Contains(strings.ToLower(s), strings.ToLower(earlier)) {
			t.Errorf("%s carries the earlier question: %s", where, s)
		}
	}
	b, _ := json.Marshal(out)
	leaks("the outcome", string(b))
	b, _ = json.Marshal(steps)
	leaks("the steps", string(b))
	leaks("the log", logs.String())
	if !strings.Contains(logs.String(), `"tool call"`) {
		t.Errorf("no tool call was logged: %s", logs.String())
	}

	// A refusal names the tool as the step does.
	m2 := &scripted{script: []func(model.Request) (model.Response, error){callNamed("c3", "denied"), say("must not be asked")}}
	a2, err := agent.New(agent.Options{Model: m2, Sources: []agent.SourceConfig{{Name: "saved", URL: hs.URL + "/mcp"}},
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	out = a2.Run(t.Context(), ask.Request{Ticket: "tkt_denied", ConversationID: "cnv_saved", Question: "What did the board decide about it?",
		History:  []ask.Turn{{Question: earlier, Outcome: gen.EventTypeAbstention, Text: "I could not tell."}},
		Identity: ask.Identity{OID: "alice", Token: "tok"}}, &recorder{})
	if out.Refusal == nil || out.Refusal.Tool != "[the question]" {
		t.Errorf("outcome %s %+v, want a refusal naming the tool [the question]", outcomeType(out), out.Refusal)
	}
	b, _ = json.Marshal(out)
	leaks("the refusal", string(b))

	// The trace: a span per call, its ask.tool as the step shows it, and nothing of it (an
	// attribute, its status, an event) carrying the earlier question.
	ended := spans.Ended()
	calls := 0
	for _, sp := range ended {
		if sp.Name() != "ask.tool_call" {
			continue
		}
		calls++
		for _, kv := range sp.Attributes() {
			if kv.Key == "ask.tool" && kv.Value.AsString() != "[the question]" {
				t.Errorf("a tool call's span has ask.tool %q, want [the question]", kv.Value.AsString())
			}
			leaks("a span's "+string(kv.Key), kv.Value.String())
		}
		leaks("a span's status", sp.Status().Description)
		for _, ev := range sp.Events() {
			for _, kv := range ev.Attributes {
				leaks("a span event's "+string(kv.Key), kv.Value.String())
			}
		}
	}
	if calls != 3 {
		t.Errorf("%d tool-call spans, want 3", calls)
	}
}
