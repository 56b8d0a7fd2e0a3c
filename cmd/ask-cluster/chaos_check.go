package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// ticketRun is everything the chaos load learned of one ask.
type ticketRun struct {
	Ticket    string
	CreateErr error // the Go client's createAsk failed, after its retries: no ticket

	Live       []rawEvent // the stream as read, forced reconnects included, duplicates kept
	LiveDone   bool
	LiveErr    error
	Reconnects int
	TimedOut   bool // the stream did not reach done within the ticket's bound

	StatusState string // getAsk after the stream: state, "" when the call failed
	StatusDone  bool   // getAsk carried done
	StatusLast  int64  // getAsk's last_seq
	StatusErr   error

	Replay     []rawEvent // a full replay from the start, after done
	ReplayDone bool
	ReplayErr  error

	Cancelled bool  // the load sent a cancel
	CancelErr error // the cancel call failed, after its retries
}

// expectation is what a run that ends in an answer carries (from a calibration ask with no
// fault): its steps and milestones.
type expectation struct {
	Steps, Milestones int
	// MaxEvents is the service's bound: below it no step is evicted, so any gap is a loss.
	MaxEvents int
	// Branches are the branches below the supervisor's that an answered run opens, as
	// "role/source" in the order opened (phase 2: a source branch per configured source, then
	// the withheld branch); none in phase 1.
	Branches []string
}

// verdict is the checker's finding for one ticket.
type verdict struct {
	Lost, Duplicated, DoubleTerminals, MissingDone, Hung, ClientErrors int
	// Branches counts the branch promises broken below the supervisor's (phase 2): a branch
	// not opened exactly once and closed exactly once, opened or closed outside the
	// supervisor's, a step or milestone outside its branch, or an answered run without the
	// branches an answer opens.
	Branches                       int
	StatusMismatch, ReplayMismatch bool
	Outcome                        string // answer, error{interrupted}, …
	Why                            []string
}

func (v *verdict) note(format string, a ...any) { v.Why = append(v.Why, fmt.Sprintf(format, a...)) }

// Anomalous reports whether the ticket broke a promise (client-visible errors aside).
func (v verdict) Anomalous() bool {
	return v.Lost+v.Duplicated+v.DoubleTerminals+v.MissingDone+v.Hung+v.Branches > 0 || v.StatusMismatch || v.ReplayMismatch
}

// branchSeen is what a ticket's log said of one branch.
type branchSeen struct {
	roster            string // "role/source", as expectation.Branches
	opens, closes     int
	openSeq, closeSeq int64
}

// inBranch is a step or milestone and the branch it names ("" in phase 1).
type inBranch struct {
	seq    int64
	typ    string
	branch string
}

func isTerminal(typ string) bool {
	return typ == "answer" || typ == "abstention" || typ == "refusal" || typ == "error"
}

// check applies every promise of the stream to one ticket: gap-free (or an eviction the bound
// explains), no duplicate, exactly one terminal, exactly one done and it last, done.steps equal
// to the steps carried, an answered run complete, getAsk agreeing with the stream, and a
// replay from the start equal to the live view.
func check(tr ticketRun, exp expectation) verdict {
	var v verdict
	if tr.CreateErr != nil {
		v.ClientErrors++
		v.Outcome = "no ticket"
		v.note("createAsk: %v", tr.CreateErr)
		return v
	}
	if tr.CancelErr != nil {
		v.ClientErrors++
		v.note("cancel: %v", tr.CancelErr)
	}
	// Duplicates: a seq delivered twice, or one tool call carried twice under two seqs.
	bySeq := map[int64]rawEvent{}
	var uniq []rawEvent
	for _, e := range tr.Live {
		if prev, ok := bySeq[e.Seq]; ok {
			v.Duplicated++
			if prev.Data != e.Data {
				v.note("seq %d delivered twice, with different data", e.Seq)
			} else {
				v.note("seq %d delivered twice", e.Seq)
			}
			continue
		}
		bySeq[e.Seq] = e
		uniq = append(uniq, e)
	}
	sort.Slice(uniq, func(i, j int) bool { return uniq[i].Seq < uniq[j].Seq })
	calls := map[string]int64{}
	steps, milestones, terminals, dones := 0, 0, 0, 0
	var terminal, done rawEvent
	branches := map[string]*branchSeen{}
	var opened []string // branch ids in the order first opened; the first is the supervisor's
	var work []inBranch
	for _, e := range uniq {
		b := eventBody(e)
		if b == nil {
			v.note("seq %d: data is not JSON", e.Seq)
			v.Lost++
			continue
		}
		switch {
		case e.Type == "step":
			steps++
			bid, _ := b["branch_id"].(string)
			work = append(work, inBranch{e.Seq, e.Type, bid})
			if id, _ := b["call_id"].(string); id != "" {
				if s, ok := calls[id]; ok {
					v.Duplicated++
					v.note("tool call %s carried at seq %d and %d", id, s, e.Seq)
				}
				calls[id] = e.Seq
			}
		case e.Type == "milestone":
			milestones++
			bid, _ := b["branch_id"].(string)
			work = append(work, inBranch{e.Seq, e.Type, bid})
		case e.Type == "branch":
			bid, _ := b["branch_id"].(string)
			bs := branches[bid]
			if bs == nil {
				bs = &branchSeen{}
				branches[bid] = bs
				opened = append(opened, bid)
			}
			if b["state"] == "open" {
				bs.opens++
				if bs.openSeq == 0 {
					bs.openSeq = e.Seq
					role, _ := b["role"].(string)
					src, _ := b["source"].(string)
					bs.roster = role + "/" + src
				}
			} else {
				bs.closes++
				bs.closeSeq = e.Seq
			}
		case isTerminal(e.Type):
			terminals++
			terminal = e
		case e.Type == "done":
			dones++
			done = e
		}
	}
	if terminals > 1 {
		v.DoubleTerminals += terminals - 1
		v.note("%d terminal events", terminals)
	}
	if dones > 1 {
		v.Duplicated += dones - 1
		v.note("%d done events", dones)
	}
	if terminal.Type != "" {
		v.Outcome = terminal.Type
		if terminal.Type == "error" {
			if k, _ := eventBody(terminal)["kind"].(string); k != "" {
				v.Outcome = "error{" + k + "}"
			}
		}
	}
	switch {
	case tr.TimedOut && !tr.LiveDone:
		v.Hung++
		v.note("no done within the ticket's bound (%d events, status %q)", len(uniq), tr.StatusState)
	case !tr.LiveDone:
		v.MissingDone++
		v.ClientErrors++
		v.note("the stream ended without done: %v", tr.LiveErr)
	case dones == 0:
		v.MissingDone++
	case len(uniq) > 0 && uniq[len(uniq)-1].Seq != done.Seq:
		v.MissingDone++
		v.note("done (seq %d) is not last (seq %d)", done.Seq, uniq[len(uniq)-1].Seq)
	}
	if tr.LiveDone && terminals == 0 {
		v.Lost++
		v.note("done without a terminal event")
	}
	// Gaps: below the bound nothing is evicted, so any seq missing is an event lost.
	if len(uniq) > 0 {
		if uniq[0].Seq != 1 {
			v.Lost += int(uniq[0].Seq - 1)
			v.note("the stream starts at seq %d", uniq[0].Seq)
		}
		evictable := int(uniq[len(uniq)-1].Seq) > exp.MaxEvents
		for i := 1; i < len(uniq); i++ {
			if gap := uniq[i].Seq - uniq[i-1].Seq - 1; gap > 0 && !evictable {
				v.Lost += int(gap)
				v.note("seqs %d..%d missing", uniq[i-1].Seq+1, uniq[i].Seq-1)
			}
		}
	}
	// done.steps counts every tool call made; below the bound each must be in the log.
	if dones > 0 {
		var d struct {
			Steps int `json:"steps"`
		}
		_ = json.Unmarshal([]byte(done.Data), &d)
		if d.Steps > steps && int(done.Seq) <= exp.MaxEvents {
			v.Lost += d.Steps - steps
			v.note("done counts %d steps, the log carries %d", d.Steps, steps)
		}
	}
	if tr.LiveDone {
		checkBranches(&v, branches, opened, work, terminal, exp)
	}
	// A run that answered made every call and reached every milestone of the script.
	if terminal.Type == "answer" && exp.Steps > 0 {
		if steps < exp.Steps {
			v.Lost += exp.Steps - steps
			v.note("answered with %d steps, the script has %d", steps, exp.Steps)
		}
		if milestones < exp.Milestones {
			v.Lost += exp.Milestones - milestones
			v.note("answered with %d milestones, want %d", milestones, exp.Milestones)
		}
	}
	// getAsk agrees with the stream.
	switch {
	case tr.StatusErr != nil:
		v.ClientErrors++
		v.note("getAsk: %v", tr.StatusErr)
	case tr.LiveDone && (tr.StatusState != terminal.Type || !tr.StatusDone || tr.StatusLast != done.Seq):
		v.StatusMismatch = true
		v.note("getAsk: state %q done %v last_seq %d; the stream: %s at seq %d", tr.StatusState, tr.StatusDone, tr.StatusLast, terminal.Type, done.Seq)
	}
	// The final replay equals the live view.
	if tr.LiveDone {
		switch {
		case tr.ReplayErr != nil || !tr.ReplayDone:
			v.ReplayMismatch = true
			v.note("replay from the start: done %v, %v", tr.ReplayDone, tr.ReplayErr)
		case !sameEvents(uniq, tr.Replay):
			v.ReplayMismatch = true
			v.note("replay from the start differs from the live view (%d live, %d replayed)", len(uniq), len(tr.Replay))
		}
	}
	return v
}

// checkBranches applies the branch promises to a ticket that reached done: the supervisor's
// branch (the first opened) opened and closed exactly once, before the terminal event; every
// other branch (phase 2) opened and closed exactly once inside the supervisor's; each step and
// milestone that names a branch inside that branch's open and close; and a run that answered
// opened every branch an answer opens (the calibration's).
func checkBranches(v *verdict, branches map[string]*branchSeen, opened []string, work []inBranch, terminal rawEvent, exp expectation) {
	var sup *branchSeen
	if len(opened) > 0 {
		sup = branches[opened[0]]
	}
	if sup == nil || sup.opens != 1 || sup.closes != 1 {
		opens, closes := 0, 0
		if sup != nil {
			opens, closes = sup.opens, sup.closes
		}
		v.Lost += max(0, 1-opens) + max(0, 1-closes)
		v.Duplicated += max(0, opens-1) + max(0, closes-1)
		v.note("supervisor branch opened %d, closed %d times", opens, closes)
		if sup == nil {
			return
		}
	}
	if terminal.Type != "" && sup.closeSeq > terminal.Seq {
		v.Branches++
		v.note("the supervisor's branch closed at seq %d, after the terminal event (%d)", sup.closeSeq, terminal.Seq)
	}
	var roster []string
	for _, id := range opened[1:] {
		bs := branches[id]
		roster = append(roster, bs.roster)
		if bs.opens != 1 || bs.closes != 1 {
			v.Branches++
			v.note("branch %s opened %d, closed %d times", id, bs.opens, bs.closes)
			continue
		}
		if bs.openSeq < sup.openSeq || bs.closeSeq > sup.closeSeq || bs.closeSeq < bs.openSeq {
			v.Branches++
			v.note("branch %s (seqs %d..%d) is not inside the supervisor's (%d..%d)", id, bs.openSeq, bs.closeSeq, sup.openSeq, sup.closeSeq)
		}
	}
	for _, w := range work {
		if w.branch == "" {
			continue
		}
		bs := branches[w.branch]
		if bs == nil || bs.openSeq == 0 || w.seq < bs.openSeq || (bs.closes > 0 && w.seq > bs.closeSeq) {
			v.Branches++
			v.note("%s at seq %d names branch %s outside its open and close", w.typ, w.seq, w.branch)
		}
	}
	if terminal.Type == "answer" && !slices.Equal(roster, exp.Branches) {
		v.Branches++
		v.note("answered with the branches %v below the supervisor's, want %v", roster, exp.Branches)
	}
}

func sameEvents(a, b []rawEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// row is one scenario's line of the table.
type row struct {
	Scenario                                                                  string
	Tickets, Lost, Duplicated, DoubleTerminals, MissingDone, Hung, ClientErrs int
	Branches                                                                  int
	StatusMismatch, ReplayMismatch                                            int
	Outcomes                                                                  map[string]int
	Reconnects, Retries                                                       int
	Fault                                                                     string // what the fault did, measured
	Duration                                                                  time.Duration
	Examples                                                                  []string
}

func (r *row) add(tr ticketRun, v verdict) {
	r.Tickets++
	r.Lost += v.Lost
	r.Duplicated += v.Duplicated
	r.DoubleTerminals += v.DoubleTerminals
	r.MissingDone += v.MissingDone
	r.Hung += v.Hung
	r.Branches += v.Branches
	r.ClientErrs += v.ClientErrors
	if v.StatusMismatch {
		r.StatusMismatch++
	}
	if v.ReplayMismatch {
		r.ReplayMismatch++
	}
	if r.Outcomes == nil {
		r.Outcomes = map[string]int{}
	}
	r.Outcomes[v.Outcome]++
	r.Reconnects += tr.Reconnects
	if (v.Anomalous() || v.ClientErrors > 0) && len(r.Examples) < 5 {
		r.Examples = append(r.Examples, tr.Ticket+": "+strings.Join(v.Why, "; "))
	}
}

// Anomalies is the sum of the promise-breaking columns.
func (r row) Anomalies() int {
	return r.Lost + r.Duplicated + r.DoubleTerminals + r.MissingDone + r.Hung + r.Branches + r.StatusMismatch + r.ReplayMismatch
}

func (r row) outcomes() string {
	keys := make([]string, 0, len(r.Outcomes))
	for k := range r.Outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.Outcomes[k]))
	}
	return strings.Join(parts, ", ")
}

// writeTable writes the one table: a line per scenario.
func writeTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| scenario | tickets | lost | duplicated | double terminals | missing done | hung | branches broken | client-visible errors | status ≠ stream | replay ≠ live | outcomes | fault |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s | %s |\n", r.Scenario, r.Tickets, r.Lost, r.Duplicated,
			r.DoubleTerminals, r.MissingDone, r.Hung, r.Branches, r.ClientErrs, r.StatusMismatch, r.ReplayMismatch, r.outcomes(), r.Fault)
	}
}
