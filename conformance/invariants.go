package conformance

import (
	"fmt"
	"strings"
)

// isTerminal reports whether an event type ends a run (done follows each).
func isTerminal(typ string) bool {
	switch typ {
	case "answer", "abstention", "refusal", "error":
		return true
	}
	return false
}

// done returns the capture's done event, if it has one.
func (c *capture) done() (event, bool) {
	for _, e := range c.Events {
		if e.Type == "done" {
			return e, true
		}
	}
	return event{}, false
}

// terminal returns the capture's first terminal event, if it has one.
func (c *capture) terminal() (event, bool) {
	for _, e := range c.Events {
		if isTerminal(e.Type) {
			return e, true
		}
	}
	return event{}, false
}

// ofType returns the capture's events of a type.
func (c *capture) ofType(typ string) []event {
	var out []event
	for _, e := range c.Events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// missing returns the seqs between 1 and the capture's last seq that it did not carry.
func (c *capture) missing() []int64 {
	seen := map[int64]bool{}
	var last int64
	for _, e := range c.Events {
		seen[e.Seq] = true
		last = max(last, e.Seq)
	}
	var out []int64
	for q := int64(1); q < last; q++ {
		if !seen[q] {
			out = append(out, q)
		}
	}
	return out
}

// seqProblems checks a capture read from the start: seq starts at 1, strictly increases, and
// skips no more values than steps were evicted (done.steps minus the steps carried), nor more
// than a log bounded at bound can have evicted (evictionProblems).
func seqProblems(label string, c *capture, bound int) []string {
	if c == nil || len(c.Events) == 0 {
		return []string{label + ": no events"}
	}
	var out []string
	if first := c.Events[0].Seq; first != 1 {
		out = append(out, fmt.Sprintf("%s: first seq %d", label, first))
	}
	for i := 1; i < len(c.Events); i++ {
		if prev, cur := c.Events[i-1].Seq, c.Events[i].Seq; cur <= prev {
			out = append(out, fmt.Sprintf("%s: seq %d after %d", label, cur, prev))
		}
	}
	m := int64(len(c.missing()))
	if m == 0 {
		return out
	}
	out = append(out, evictionProblems(label, c, bound, false)...)
	d, ok := c.done()
	if !ok {
		return append(out, fmt.Sprintf("%s: %d seq values skipped and no done to account for them", label, m))
	}
	evicted := d.num("steps") - int64(len(c.ofType("step")))
	if m > evicted {
		out = append(out, fmt.Sprintf("%s: %d seq values skipped (%s) but only %d steps were evicted", label, m, seqList(c.missing()), max(evicted, 0)))
	}
	return out
}

// seqList prints at most a few seqs.
func seqList(seqs []int64) string {
	var parts []string
	for i, q := range seqs {
		if i == 5 {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprint(q))
	}
	return strings.Join(parts, ",")
}

// typesOf lists the capture's events as seq:type.
func typesOf(events []event) string {
	var parts []string
	for _, e := range events {
		parts = append(parts, fmt.Sprintf("%d:%s", e.Seq, e.Type))
	}
	if len(parts) > 12 {
		parts = append(parts[:12], "…")
	}
	return strings.Join(parts, " ")
}

// nonSteps returns seq:type of every event that is not a step: what must survive any overflow.
func nonSteps(events []event) []string {
	var out []string
	for _, e := range events {
		if e.Type != "step" {
			out = append(out, fmt.Sprintf("%d:%s", e.Seq, e.Type))
		}
	}
	return out
}

// seqsOf lists the events' seqs.
func seqsOf(events []event) []int64 {
	out := make([]int64, len(events))
	for i, e := range events {
		out[i] = e.Seq
	}
	return out
}

// after returns the events with seq greater than q.
func after(events []event, q int64) []event {
	var out []event
	for _, e := range events {
		if e.Seq > q {
			out = append(out, e)
		}
	}
	return out
}
