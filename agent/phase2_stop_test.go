package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask/agent/model"
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

// bobsRefusedRun runs bob's on-call pay question in phase 2 over m, with a 20 s deadline, and
// fails unless it ends in a refusal of run_query (want says whose); it returns what was emitted
// and whether the run's deadline had passed when it ended.
func bobsRefusedRun(t *testing.T, m model.Model, want string) (*recorder, bool) {
	t.Helper()
	s := newStack(t)
	a := s.phase2Agent(t, func(model.Model) model.Model { return m })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	rec := &recorder{}
	out := a.Run(ctx, s.request(t, "bob", "What was the on-call pay per team in 2026-Q3?"), rec)
	if out.Refusal == nil || out.Refusal.Tool != "run_query" {
		t.Fatalf("outcome %s %+v, want %s", outcomeType(out), out.Error, want)
	}
	return rec, ctx.Err() != nil
}

// TestPhase2ReconciliationRefusalStopsTheWithheldBranch: a refusal in the supervisor's
// reconciliation is the run's refusal at once, as a refusal in any branch is: it stops the
// withheld branch (its model call ends cancelled) instead of waiting it out. The run used to
// wait for the withheld branch to end on its own, here until its own deadline, a tenth of the
// run's time before the run's.
func TestPhase2ReconciliationRefusalStopsTheWithheldBranch(t *testing.T) {
	m := &refusingReconciliation{stalled: make(chan struct{})}
	rec, _ := bobsRefusedRun(t, m, "the reconciliation's refusal")
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

// refusingBranch is a model whose warehouse branch queries oncall_pay (which bob may not read)
// once the catalog branch's model call is under way, and whose catalog and withheld branches'
// calls hang until their contexts end, keeping how they ended.
type refusingBranch struct {
	mu      sync.Mutex
	ended   map[string]error // a hanging branch's context's error, by branch
	stalled chan struct{}    // closed once the catalog branch hangs
	once    sync.Once
}

func (m *refusingBranch) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	if strings.Contains(req.System, `source "warehouse"`) {
		<-m.stalled
		args, _ := json.Marshal(map[string]any{"sql": "SELECT * FROM oncall_pay"})
		return model.Response{ToolCalls: []model.ToolCall{{ID: "w1", Name: "run_query", Args: args}}}, nil
	}
	name := "withheld"
	if strings.Contains(req.System, `source "catalog"`) {
		name = "catalog"
		m.once.Do(func() { close(m.stalled) })
	} else if !isWithheld(req) {
		return model.Response{}, errors.New("unexpected model call: " + req.System[:min(len(req.System), 80)])
	}
	<-ctx.Done()
	m.mu.Lock()
	m.ended[name] = ctx.Err()
	m.mu.Unlock()
	return model.Response{}, ctx.Err()
}

// TestPhase2BranchRefusalStopsTheOtherBranches: a refusal in one source branch is the run's
// refusal at once (the package doc: "a refusal in any branch stops the others at once"): the
// other source branch and the withheld branch, each in a model call, are stopped (their calls
// end cancelled) rather than waited out to the run's deadline, and every branch is closed.
// With the stop removed from fanOut, this run waited for its 20 s deadline and ended in error.
func TestPhase2BranchRefusalStopsTheOtherBranches(t *testing.T) {
	m := &refusingBranch{ended: map[string]error{}, stalled: make(chan struct{})}
	rec, deadline := bobsRefusedRun(t, m, "the warehouse branch's refusal")
	if deadline {
		t.Errorf("the run reached its deadline: the refusal did not stop the other branches")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, name := range []string{"catalog", "withheld"} {
		if err, ok := m.ended[name]; !ok || !errors.Is(err, context.Canceled) {
			t.Errorf("the %s branch's call ended with %v (seen %v), want stopped (context.Canceled) by the refusal", name, err, ok)
		}
	}
	opened, closed := map[string]bool{}, map[string]bool{}
	for _, ev := range rec.events {
		if b, ok := ev.(gen.BranchBody); ok {
			if b.State == gen.BranchBodyStateOpen {
				opened[b.BranchId] = true
			} else {
				closed[b.BranchId] = true
			}
		}
	}
	for id := range opened {
		if !closed[id] {
			t.Errorf("branch %s was opened and never closed", id)
		}
	}
	if len(opened) < 3 {
		t.Errorf("%d branches opened, want the two sources' and the withheld one", len(opened))
	}
}
