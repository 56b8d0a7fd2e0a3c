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
