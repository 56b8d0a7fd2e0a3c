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

// p2 builds a phase-2 ticket's events: "branch:<id>:<state>[:role/source]" and
// "step:<call>:<branch>", "milestone:<branch>", others as evs.
func p2(specs ...string) []rawEvent {
	var out []rawEvent
	for i, s := range specs {
		parts := strings.Split(s, ":")
		data := fmt.Sprintf(`{"seq":%d,"type":%q`, i+1, parts[0])
		switch parts[0] {
		case "branch":
			data += fmt.Sprintf(`,"branch_id":%q,"state":%q`, parts[1], parts[2])
			if len(parts) > 3 {
				role, src, _ := strings.Cut(parts[3], "/")
				data += fmt.Sprintf(`,"role":%q`, role)
				if src != "" {
					data += fmt.Sprintf(`,"source":%q,"parent":"b1"`, src)
				}
			}
		case "step":
			data += fmt.Sprintf(`,"call_id":"c%s","branch_id":%q`, parts[1], parts[2])
		case "milestone":
			data += fmt.Sprintf(`,"branch_id":%q`, parts[1])
		case "error":
			data += fmt.Sprintf(`,"kind":%q`, parts[1])
		case "done":
			data += `,"steps":` + parts[1]
		}
		out = append(out, rawEvent{Seq: int64(i + 1), Type: parts[0], Data: data + "}"})
	}
	return out
}

var (
	p2Clean = []string{"accepted", "branch:b1:open:supervisor", "branch:b2:open:source/demo", "branch:b3:open:withheld",
		"milestone:b2", "step:1:b2", "milestone:b3", "step:2:b3", "branch:b3:close", "milestone:b2", "step:3:b2", "branch:b2:close",
		"milestone:b1", "branch:b1:close", "answer", "done:3"}
	p2Exp = expectation{Steps: 3, Milestones: 4, MaxEvents: 1000, Branches: []string{"source/demo", "withheld/"}}
)

func p2Run(specs []string) ticketRun {
	live := p2(specs...)
	term := live[len(live)-2].Type
	return ticketRun{Ticket: "t", Live: live, LiveDone: true, StatusState: term, StatusDone: true,
		StatusLast: int64(len(live)), Replay: live, ReplayDone: true}
}

// TestCheckerPhase2Branches: a phase-2 ticket, a branch per source and the withheld branch
// inside the supervisor's, is clean (the checker took every branch event for the supervisor's
// and called each such ticket broken: "supervisor branch opened 3, closed 3 times"), and each
// way of breaking the branches' promises is found.
func TestCheckerPhase2Branches(t *testing.T) {
	if v := check(p2Run(p2Clean), p2Exp); v.Anomalous() || v.Outcome != "answer" {
		t.Fatalf("a clean phase-2 ticket: %+v", v)
	}
	interrupted := []string{"accepted", "branch:b1:open:supervisor", "branch:b2:open:source/demo", "branch:b3:open:withheld",
		"milestone:b2", "step:1:b2", "branch:b3:close", "branch:b2:close", "branch:b1:close", "error:interrupted", "done:1"}
	if v := check(p2Run(interrupted), p2Exp); v.Anomalous() || v.Outcome != "error{interrupted}" {
		t.Errorf("an interrupted phase-2 ticket, every branch closed: %+v", v)
	}
	edit := func(f func([]string) []string) []string { return f(append([]string(nil), p2Clean...)) }
	for _, tt := range []struct {
		name  string
		specs []string
	}{
		{"a branch never closed", edit(func(s []string) []string { return append(s[:11:11], s[12:]...) })},
		{"a branch closed twice", edit(func(s []string) []string {
			return append(s[:12:12], append([]string{"branch:b2:close"}, s[12:]...)...)
		})},
		{"a branch closed after the supervisor's", edit(func(s []string) []string {
			s[11], s[12], s[13] = "milestone:b1", "branch:b1:close", "branch:b2:close"
			return s
		})},
		{"a step after its branch closed", edit(func(s []string) []string {
			s[7], s[8] = "branch:b3:close", "step:2:b3"
			return s
		})},
		{"a step in a branch never opened", edit(func(s []string) []string { s[10] = "step:3:b9"; return s })},
		{"an answer without the withheld branch", edit(func(s []string) []string {
			s[3], s[6], s[7], s[8] = "milestone:b2", "milestone:b2", "step:2:b2", "milestone:b2"
			return s
		})},
		{"the supervisor's branch closed after the terminal", edit(func(s []string) []string {
			s[13], s[14] = "answer", "branch:b1:close"
			return s
		})},
	} {
		if v := check(p2Run(tt.specs), p2Exp); v.Branches == 0 {
			t.Errorf("%s: not found (%+v)", tt.name, v)
		}
	}
}
