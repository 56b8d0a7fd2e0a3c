package conformance

import (
	"context"
	"fmt"
	"time"
)

// allSteps returns the steps of a run that any of its captures carried, by call_id.
func allSteps(r *run) []event {
	var out []event
	seen := map[string]bool{}
	for _, c := range []*capture{r.live, r.final} {
		if c == nil {
			continue
		}
		for _, e := range c.ofType("step") {
			if id := e.str("call_id"); !seen[id] {
				seen[id] = true
				out = append(out, e)
			}
		}
	}
	return out
}

func checkTicketBeforeToolCall(ctx context.Context, s *session) verdict {
	sr, err := s.slowRunFixture(ctx)
	if err != nil {
		return broken(err)
	}
	r := sr.run
	steps := allSteps(r)
	if s.cfg.AuditURL != "" && len(steps) > 0 {
		var first time.Time
		for _, st := range steps {
			lines, err := s.audit(ctx, st.str("call_id"))
			if err != nil {
				return broken(err)
			}
			for _, l := range lines {
				if first.IsZero() || l.TS.Before(first) {
					first = l.TS
				}
			}
		}
		if first.IsZero() {
			return fail("an audit line for the run's tool calls", "none")
		}
		if !first.After(r.admitted) {
			return fail("the first audit line after the ticket arrived",
				fmt.Sprintf("the first tool call was audited %s before the 202 arrived", r.admitted.Sub(first).Round(time.Millisecond)))
		}
		return pass("the 202 arrived %s before the first audited tool call", first.Sub(r.admitted).Round(time.Millisecond))
	}
	// Without an audit line to compare (no audit log, or every step evicted): the slow
	// question's first model turn is silent, so when the ticket comes before any work the
	// first sign of work (a step or a milestone) arrives on the live stream well after it.
	why := "no audit log"
	if s.cfg.AuditURL != "" {
		why = "every step was evicted, so no call_id to look up"
	}
	var firstWork time.Time
	for _, e := range r.live.Events {
		if e.Type == "step" || e.Type == "milestone" {
			firstWork = e.At
			break
		}
	}
	if firstWork.IsZero() {
		return fail("a step or milestone on the live stream of the slow run", typesOf(r.live.Events))
	}
	if d := firstWork.Sub(r.admitted); d < s.cfg.SlowWait/2 {
		return fail(fmt.Sprintf("the first step or milestone at least %s after the 202 (the first model turn is silent for %s)", s.cfg.SlowWait/2, s.cfg.SlowWait),
			fmt.Sprintf("%s after", d.Round(time.Millisecond)))
	}
	return pass("%s; the first work arrived %s after the 202, past the silent first model turn", why, firstWork.Sub(r.admitted).Round(time.Millisecond))
}

func checkStepMs(ctx context.Context, s *session) verdict {
	if s.cfg.AuditURL == "" {
		return skip("no audit log to compare with (--audit)")
	}
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	tol := s.cfg.StepMsTolerance.Milliseconds()
	var found []string
	n := 0
	for _, r := range runs {
		for _, st := range allSteps(r) {
			n++
			lines, err := s.audit(ctx, st.str("call_id"))
			if err != nil {
				return broken(err)
			}
			if len(lines) != 1 {
				found = append(found, fmt.Sprintf("%s: %d audit lines for step %d", r.label, len(lines), st.Seq))
				continue
			}
			if ms, am := st.num("ms"), lines[0].Ms; ms < am || ms > am+tol {
				found = append(found, fmt.Sprintf("%s: step %d ms %d, audit ms %d", r.label, st.Seq, ms, am))
			}
		}
	}
	if n == 0 {
		return skip("no run carried a step event to compare")
	}
	return problems(fmt.Sprintf("every step's ms within [audit.ms, audit.ms + %d]", tol), found,
		fmt.Sprintf("%d steps: one audit line each, audit.ms ≤ step.ms ≤ audit.ms + %d ms", n, tol))
}
