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

// ticketSlack is the least slack a run's first tool call has to start before its 202 arrived. The
// service writes the ticket somewhere within the POST's round trip and starts the run only then;
// the client reads it a little later. So a run's first call may start before the 202 arrives by
// as much as the answer took to reach the client, taken to be at most half the round trip (or
// ticketSlack when that is less). A service that holds the ticket back until its run has begun
// starts that work early in the round trip, which is what this catches.
const ticketSlack = 50 * time.Millisecond

// firstCallStart is when the earliest audited tool call of a run started (the audit line's ts,
// its end, less its ms), and whether any of the run's steps was audited.
func (s *session) firstCallStart(ctx context.Context, r *run) (time.Time, bool, error) {
	var first time.Time
	for _, st := range allSteps(r) {
		lines, err := s.audit(ctx, st.str("call_id"))
		if err != nil {
			return time.Time{}, false, err
		}
		for _, l := range lines {
			if t := l.TS.Add(-time.Duration(l.Ms) * time.Millisecond); first.IsZero() || t.Before(first) {
				first = t
			}
		}
	}
	return first, !first.IsZero(), nil
}

func checkTicketBeforeToolCall(ctx context.Context, s *session) verdict {
	sr, err := s.slowRunFixture(ctx)
	if err != nil {
		return broken(err)
	}
	r := sr.run
	if s.cfg.AuditURL != "" {
		runs, err := s.allRuns(ctx)
		if err != nil {
			return broken(err)
		}
		var found []string
		n := 0
		lead, leadRun := time.Duration(1<<63-1), ""
		for _, x := range runs {
			first, ok, err := s.firstCallStart(ctx, x)
			if err != nil {
				return broken(err)
			}
			if !ok {
				continue
			}
			n++
			// The slow run's first call follows a silent model turn: no slack for it.
			slack := max(ticketSlack, x.admitted.Sub(x.sent)/2)
			if x == r {
				slack = 0
			}
			d := first.Sub(x.admitted)
			if d < lead {
				lead, leadRun = d, fmt.Sprintf("%s, whose POST took %s", x.label, x.admitted.Sub(x.sent).Round(time.Millisecond))
			}
			if d <= -slack {
				found = append(found, fmt.Sprintf("%s: its first tool call started %s before the 202 arrived (the POST took %s)",
					x.label, (-d).Round(time.Millisecond), x.admitted.Sub(x.sent).Round(time.Millisecond)))
			}
		}
		if n > 0 {
			return problems("every run's first audited tool call to start after its 202 arrived (less half the POST's round trip, at least 50 ms; none for the slow run)", found,
				fmt.Sprintf("%d runs: each first tool call started after the 202 arrived (less half the POST's round trip); the least margin %s (%s)", n, lead.Round(time.Millisecond), leadRun))
		}
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

// callerOIDs are the oid claims of A's and B's bearers, or why the suite cannot read them.
func (s *session) callerOIDs(ctx context.Context) (map[Identity]string, string) {
	out := map[Identity]string{}
	for _, who := range []Identity{A, B} {
		tok, err := s.token(ctx, who)
		if err != nil {
			return nil, err.Error()
		}
		oid, err := oidOf(tok)
		if err != nil {
			return nil, fmt.Sprintf("identity %s: %v", who, err)
		}
		out[who] = oid
	}
	if out[A] == out[B] {
		return nil, "identities A and B have the same oid"
	}
	return out, ""
}

// answerAsB is B asking the answer question, followed to the end: a run of the second identity
// for the checks that compare identities, when the suite made none (the behaviour checks make
// B's refusal run).
func (s *session) answerAsB(ctx context.Context) (*run, error) {
	return s.asB.get(ctx, func(ctx context.Context) (*run, error) {
		return s.fullRun(ctx, "answer as B", B, "", s.cfg.Questions.Answer)
	})
}

func checkCallerIdentity(ctx context.Context, s *session) verdict {
	if s.cfg.AuditURL == "" {
		return skip("no audit log to compare with (--audit)")
	}
	oids, why := s.callerOIDs(ctx)
	if oids == nil {
		return skip("cannot tell whose calls a source audited: %s", why)
	}
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	hasB := false
	for _, r := range runs {
		hasB = hasB || (r.who == B && len(allSteps(r)) > 0)
	}
	if !hasB {
		r, err := s.answerAsB(ctx)
		if err != nil {
			return broken(err)
		}
		runs = append(runs, r)
	}
	var found []string
	n := map[Identity]int{}
	for _, r := range runs {
		for _, st := range allSteps(r) {
			lines, err := s.audit(ctx, st.str("call_id"))
			if err != nil {
				return broken(err)
			}
			for _, l := range lines {
				n[r.who]++
				if l.OID != oids[r.who] {
					found = append(found, fmt.Sprintf("%s (identity %s): step %d audited as %q", r.label, r.who, st.Seq, l.OID))
				}
			}
		}
	}
	if n[B] == 0 {
		return fail("a run of identity B with an audited tool call", "none")
	}
	return problems("every tool call audited as the identity that asked the run", found,
		fmt.Sprintf("%d calls of A's runs and %d of B's: each audited as its own caller", n[A], n[B]))
}
