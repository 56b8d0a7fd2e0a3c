package main

import (
	"testing"

	"github.com/das-ask/ask/gen"
)

func TestMilestoneSentence(t *testing.T) {
	tests := []struct {
		phase   gen.MilestonePhase
		subject string
		want    string
	}{
		{gen.MilestonePhaseGrounding, "incident", "Looking up 'incident' in the catalog…"},
		// The agent's subjects when it can name no term or table (agent/milestone.go,
		// fallbackSubject): the kind of thing, said as no subject.
		{gen.MilestonePhaseGrounding, "catalog", "Looking in the catalog…"},
		{gen.MilestonePhaseQuerying, "query", "Running a query…"},
		{gen.MilestonePhaseDiscovering, "incidents", "Reading the incidents table…"},
		{gen.MilestonePhaseDiscovering, "incidents, teams", "Reading the incidents, teams tables…"},
		{gen.MilestonePhaseDiscovering, "tables", "Looking at which tables there are…"},
		{gen.MilestonePhaseQuerying, "", "Running a query…"},
		{gen.MilestonePhaseQuerying, "incidents", "Running a query on incidents…"},
		{gen.MilestonePhaseReconciling, "demo, hr", "Combining sources…"},
		{gen.MilestonePhase("planning"), "budget", "Working on budget…"},
	}
	for _, tt := range tests {
		if got := milestoneSentence(gen.MilestoneEvent{Phase: tt.phase, Subject: tt.subject}); got != tt.want {
			t.Errorf("%s %q: got %q, want %q", tt.phase, tt.subject, got, tt.want)
		}
	}
}
