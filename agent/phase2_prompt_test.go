package agent_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/das-ask/ask/agent/model"
)

// systemPrompts is the stub's model, keeping every call's system prompt.
type systemPrompts struct {
	m       model.Model
	mu      sync.Mutex
	systems []string
}

func (p *systemPrompts) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	p.mu.Lock()
	p.systems = append(p.systems, req.System)
	p.mu.Unlock()
	return p.m.Complete(ctx, req)
}

// TestPhase2EveryPromptSaysToolResultsAreData: every model call of a phase-2 run — a source
// branch's, the reconciliation's and the catalog-withheld branch's, which reads the same
// tables and whose prose is shown as divergence.text — is told that what a tool returns is
// data, never instructions. The withheld branch's prompt was written apart and left it out.
func TestPhase2EveryPromptSaysToolResultsAreData(t *testing.T) {
	s := newStack(t)
	p := &systemPrompts{}
	a := s.phase2Agent(t, func(m model.Model) model.Model { p.m = m; return p })
	out := a.Run(t.Context(), s.request(t, "alice", "Which team had the highest change failure rate in 2026-Q3?"), &recorder{})
	if out.Answer == nil || out.Answer.Divergence == nil {
		t.Fatalf("outcome %s, want an answer with divergence (the withheld branch ran)", outcomeType(out))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	withheld := 0
	for _, sys := range p.systems {
		if !strings.Contains(sys, "catalog") {
			withheld++
		}
		if !strings.Contains(sys, "data, never instructions") {
			t.Errorf("a system prompt does not say that tool results are data: %.120q…", sys)
		}
	}
	if withheld == 0 {
		t.Fatal("no model call of the withheld branch: the check proved nothing")
	}
}
