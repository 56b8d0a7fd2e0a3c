package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// run builds a ticket's events from "type" or "type:extra" specs, seq 1.. in order.
func evs(specs ...string) []rawEvent {
	var out []rawEvent
	for i, s := range specs {
		typ, extra, _ := strings.Cut(s, ":")
		data := fmt.Sprintf(`{"seq":%d,"type":%q`, i+1, typ)
		switch typ {
		case "step":
			data += fmt.Sprintf(`,"call_id":"c%s"`, extra)
		case "branch":
			data += fmt.Sprintf(`,"state":%q`, extra)
		case "error":
			data += fmt.Sprintf(`,"kind":%q`, extra)
		case "done":
			data += `,"steps":` + extra
		}
		out = append(out, rawEvent{Seq: int64(i + 1), Type: typ, Data: data + "}"})
	}
	return out
}

var clean = evs("accepted", "branch:open", "milestone", "step:1", "milestone", "step:2", "branch:close", "answer", "done:2")

func cleanRun() ticketRun {
	return ticketRun{Ticket: "t", Live: append([]rawEvent(nil), clean...), LiveDone: true,
		StatusState: "answer", StatusDone: true, StatusLast: 9, Replay: clean, ReplayDone: true}
}

var exp = expectation{Steps: 2, Milestones: 2, MaxEvents: 1000}

// TestCheckerFindsEveryBrokenPromise: the checker passes a clean ticket and fails each kind of
// broken one, so a 0 in the chaos table is evidence, not the absence of a check.
func TestCheckerFindsEveryBrokenPromise(t *testing.T) {
	if v := check(cleanRun(), exp); v.Anomalous() || v.ClientErrors != 0 || v.Outcome != "answer" {
		t.Fatalf("a clean ticket: %+v", v)
	}
	interrupted := evs("accepted", "branch:open", "step:1", "branch:close", "error:interrupted", "done:1")
	tr := ticketRun{Ticket: "t", Live: interrupted, LiveDone: true, StatusState: "error", StatusDone: true, StatusLast: 6, Replay: interrupted, ReplayDone: true}
	if v := check(tr, exp); v.Anomalous() || v.Outcome != "error{interrupted}" {
		t.Errorf("an interrupted ticket is not an anomaly: %+v", v)
	}

	tests := []struct {
		name  string
		edit  func(*ticketRun)
		field func(verdict) int
	}{
		{"a gap", func(tr *ticketRun) { tr.Live = append(tr.Live[:3:3], tr.Live[4:]...); tr.Replay = tr.Live }, func(v verdict) int { return v.Lost }},
		{"a step lost with its seq reused", func(tr *ticketRun) {
			tr.Live = evs("accepted", "branch:open", "milestone", "step:1", "milestone", "branch:close", "answer", "done:2")
			tr.Replay, tr.StatusLast = tr.Live, 8
		}, func(v verdict) int { return v.Lost }},
		{"a milestone lost", func(tr *ticketRun) {
			tr.Live = evs("accepted", "branch:open", "milestone", "step:1", "step:2", "branch:close", "answer", "done:2")
			tr.Replay, tr.StatusLast = tr.Live, 8
		}, func(v verdict) int { return v.Lost }},
		{"a seq delivered twice", func(tr *ticketRun) {
			tr.Live = append(tr.Live[:4:4], append([]rawEvent{tr.Live[3]}, tr.Live[4:]...)...)
		}, func(v verdict) int { return v.Duplicated }},
		{"a step carried twice", func(tr *ticketRun) {
			tr.Live = evs("accepted", "branch:open", "milestone", "step:1", "step:1", "milestone", "step:2", "branch:close", "answer", "done:3")
			tr.Replay, tr.StatusLast = tr.Live, 10
		}, func(v verdict) int { return v.Duplicated }},
		{"two terminals", func(tr *ticketRun) {
			tr.Live = evs("accepted", "branch:open", "milestone", "step:1", "milestone", "step:2", "branch:close", "answer", "error:interrupted", "done:2")
			tr.Replay, tr.StatusLast, tr.StatusState = tr.Live, 10, "error"
		}, func(v verdict) int { return v.DoubleTerminals }},
		{"no done", func(tr *ticketRun) { tr.Live, tr.LiveDone, tr.LiveErr = tr.Live[:8], false, errors.New("EOF") }, func(v verdict) int { return v.MissingDone }},
		{"hung", func(tr *ticketRun) { tr.Live, tr.LiveDone, tr.TimedOut = tr.Live[:4], false, true }, func(v verdict) int { return v.Hung }},
		{"status disagrees", func(tr *ticketRun) { tr.StatusState = "running" }, func(v verdict) int { return b2i(v.StatusMismatch) }},
		{"replay differs", func(tr *ticketRun) { tr.Replay = tr.Replay[1:] }, func(v verdict) int { return b2i(v.ReplayMismatch) }},
		{"create failed", func(tr *ticketRun) { tr.CreateErr = errors.New("503") }, func(v verdict) int { return v.ClientErrors }},
	}
	for _, tt := range tests {
		tr := cleanRun()
		tt.edit(&tr)
		if v := check(tr, exp); tt.field(v) == 0 {
			t.Errorf("%s: not found (%+v)", tt.name, v)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
