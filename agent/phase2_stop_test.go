package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/agent/model"
	demosource "github.com/das-ask/ask/demo/source"
	"github.com/das-ask/ask/gen"
)

// isWithheld reports whether req is a model call of the catalog-withheld branch: the one
// system prompt that says nothing of a catalog.
func isWithheld(req model.Request) bool { return !strings.Contains(req.System, "catalog") }

// refusingReconciliation is a model whose source branches find nothing, whose reconciliation
// queries oncall_pay (which bob may not read) and whose withheld branch hangs until its context
// ends, keeping how it ended.
type refusingReconciliation struct {
	mu      sync.Mutex
	ended   error // the withheld branch's context's error once it ended
	stalled chan struct{}
}

func (m *refusingReconciliation) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	switch {
	case isWithheld(req):
		close(m.stalled)
		<-ctx.Done()
		m.mu.Lock()
		m.ended = ctx.Err()
		m.mu.Unlock()
		return model.Response{}, ctx.Err()
	case strings.Contains(req.System, "Reconcile"):
		<-m.stalled // the withheld branch is running when the refusal comes
		args, _ := json.Marshal(map[string]any{"sql": "SELECT * FROM oncall_pay"})
		return model.Response{ToolCalls: []model.ToolCall{{ID: "r1", Name: "run_query", Args: args}}}, nil
	}
	return model.Response{Text: "Nothing from this source."}, nil
}

// TestPhase2ReconciliationRefusalStopsTheWithheldBranch: a refusal in the supervisor's
// reconciliation is the run's refusal at once, as a refusal in any branch is: it stops the
// withheld branch (its model call ends cancelled) instead of waiting it out. The run used to
// wait for the withheld branch to end on its own, here until its own deadline, a tenth of the
// run's time before the run's.
func TestPhase2ReconciliationRefusalStopsTheWithheldBranch(t *testing.T) {
	s := newStack(t)
	m := &refusingReconciliation{stalled: make(chan struct{})}
	a := s.phase2Agent(t, func(model.Model) model.Model { return m })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	rec := &recorder{}
	out := a.Run(ctx, s.request(t, "bob", "What was the on-call pay per team in 2026-Q3?"), rec)
	if out.Refusal == nil || out.Refusal.Tool != "run_query" {
		t.Fatalf("outcome %s %+v, want the reconciliation's refusal", outcomeType(out), out.Error)
	}
	m.mu.Lock()
	ended := m.ended
	m.mu.Unlock()
	if !errors.Is(ended, context.Canceled) {
		t.Errorf("the withheld branch ended with %v, want stopped (context.Canceled) by the refusal", ended)
	}
	closed := false
	for _, ev := range rec.events {
		if b, ok := ev.(gen.BranchBody); ok && b.Role == "withheld" && b.State == gen.BranchBodyStateClose {
			closed = true
		}
	}
	if !closed {
		t.Errorf("the withheld branch was not closed")
	}
}

// hangingSource is an MCP server whose one tool, run_query, answers only once its request
// ends (the caller gave up) or release closes; inFlight closes when the first call arrives.
func hangingSource(t *testing.T, inFlight chan struct{}) string {
	t.Helper()
	release := make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	var once sync.Once
	srv.AddTool(&mcp.Tool{Name: "run_query", InputSchema: map[string]any{"type": "object"}, Meta: mcp.Meta{"ask/role": "query"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			once.Do(func() { close(inFlight) })
			select {
			case <-ctx.Done():
			case <-release:
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the call
	return hs.URL
}

// refusingBesideAHang is the model of a phase-2 run over a warehouse and a hanging source: the
// hanging source's branch calls its tool; the warehouse's branch, once that call is in flight,
// queries oncall_pay (which bob may not read).
type refusingBesideAHang struct{ inFlight chan struct{} }

func (m refusingBesideAHang) Complete(_ context.Context, req model.Request) (model.Response, error) {
	if len(req.Messages) > 1 { // after a tool call
		return model.Response{Text: "Nothing more from this source."}, nil
	}
	switch {
	case strings.Contains(req.System, `"slow"`):
		return model.Response{ToolCalls: []model.ToolCall{{ID: "s1", Name: "run_query", Args: json.RawMessage(`{"sql":"SELECT 1"}`)}}}, nil
	case strings.Contains(req.System, `"warehouse"`):
		<-m.inFlight
		return model.Response{ToolCalls: []model.ToolCall{{ID: "w1", Name: "run_query", Args: json.RawMessage(`{"sql":"SELECT * FROM oncall_pay"}`)}}}, nil
	}
	return model.Response{Text: "Nothing."}, nil
}

// TestPhase2RefusalDoesNotWaitForAToolCallInFlight: a refusal in one branch is the run's at
// once, though another branch has a tool call in flight: that call is cut, not waited out. The
// run used to wait for it, up to the tool timeout (60 s: bob's refusal told a minute late when
// another source hung). The tool timeout here is an hour; the guard below only reports a run
// that waits.
func TestPhase2RefusalDoesNotWaitForAToolCallInFlight(t *testing.T) {
	s := newStack(t)
	inFlight := make(chan struct{})
	a, err := agent.New(agent.Options{Model: refusingBesideAHang{inFlight}, Phase: 2, ToolTimeout: time.Hour, Sources: []agent.SourceConfig{
		{Name: "warehouse", URL: s.part(t, demosource.PartWarehouse)}, {Name: "slow", URL: hangingSource(t, inFlight)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	done := make(chan ask.Outcome, 1)
	go func() {
		done <- a.Run(t.Context(), s.request(t, "bob", "What was the on-call pay per team in 2026-Q3?"), rec)
	}()
	select {
	case out := <-done:
		if out.Refusal == nil || out.Refusal.Source != "warehouse" {
			t.Fatalf("outcome %s, want the warehouse's refusal", outcomeType(out))
		}
	case <-time.After(time.Minute):
		t.Fatal("the refusal waited for the other branch's tool call")
	}
	for _, ev := range rec.events {
		if st, ok := ev.(gen.StepBody); ok && st.Source == "slow" {
			t.Errorf("the cut call was reported as a step: %+v", st)
		}
	}
}
