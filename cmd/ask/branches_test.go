package main

import (
	"strings"
	"testing"

	"github.com/das-ask/ask/gen"
)

func TestDivergenceSentence(t *testing.T) {
	one := &gen.Divergence{
		Result:  gen.ResultSet{Columns: []string{"team", "failure_rate_pct"}, Rows: [][]any{{"Data", 11.1}}},
		Sql:     []string{"SELECT …"},
		Without: []string{"change failure rate"},
	}
	if got, want := divergenceSentence(one), "Without the catalog's definition of change failure rate, the answer would have been team Data, failure_rate_pct 11.1."; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	head := &gen.Divergence{Headline: &gen.Headline{Label: "incidents", Value: float64(12)}, Without: []string{"incident", "severity"}}
	if got, want := divergenceSentence(head), "Without the catalog's definitions of incident, severity, the answer would have been incidents: 12."; got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	var b strings.Builder
	renderAnswer(&b, &gen.AnswerEvent{Text: "Mobile had the highest change failure rate in 2026-Q3: 14%.", Divergence: one}, false)
	if !strings.Contains(b.String(), "Without the catalog's definition of change failure rate") {
		t.Errorf("the answer does not say its divergence:\n%s", b.String())
	}
}

// TestBranchesCollapsed: by default a branch is one line as it opens and its milestones are not
// shown; the supervisor's (and a phase-1 run's, which names no branch) are; expanded, a branch's
// milestones are shown marked with it.
func TestBranchesCollapsed(t *testing.T) {
	src, b2, b1 := "warehouse", "b2", "b1"
	open := gen.BranchEvent{BranchId: b2, Role: "source", Source: &src, State: gen.BranchEventStateOpen}
	inBranch := gen.MilestoneEvent{Phase: gen.MilestonePhaseQuerying, Subject: "deployments", BranchId: &b2}
	sup := gen.MilestoneEvent{Phase: gen.MilestonePhaseReconciling, Subject: "change failure rate", BranchId: &b1}
	phase1 := gen.MilestoneEvent{Phase: gen.MilestonePhaseGrounding, Subject: "incident"}

	var v branchView
	if got := v.open(gen.BranchEvent{BranchId: b1, Role: "supervisor", State: gen.BranchEventStateOpen}); got != "" {
		t.Errorf("supervisor open: %q, want nothing", got)
	}
	if got := v.open(open); got != "Asking warehouse…" {
		t.Errorf("open: %q", got)
	}
	if _, show := v.milestone(inBranch); show {
		t.Error("collapsed: a branch's milestone was shown")
	}
	for _, m := range []gen.MilestoneEvent{sup, phase1} {
		if _, show := v.milestone(m); !show {
			t.Errorf("collapsed: %+v not shown", m)
		}
	}
	v = branchView{expand: true}
	v.open(open)
	if got, show := v.milestone(inBranch); !show || got != "  [warehouse] Running a query on deployments…" {
		t.Errorf("expanded: %q %v", got, show)
	}
}
