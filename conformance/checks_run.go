package conformance

import (
	"context"
	"fmt"
	"slices"
)

// completeCaptures are the captures read from the start that reached the end of the stream.
func completeCaptures(runs []*run) (out []fromStart, found []string) {
	for _, fs := range startCaptures(runs) {
		if why := streamOK(fs.c); why != "" {
			found = append(found, fs.label+": "+why)
			continue
		}
		out = append(out, fs)
	}
	return out, found
}

func checkBranches(ctx context.Context, s *session) verdict {
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	caps, found := completeCaptures(runs)
	for _, fs := range caps {
		var open, close []event
		for _, e := range fs.c.ofType("branch") {
			if e.str("role") != "supervisor" {
				continue
			}
			if e.str("state") == "open" {
				open = append(open, e)
			} else {
				close = append(close, e)
			}
		}
		if len(open) != 1 || len(close) != 1 {
			found = append(found, fmt.Sprintf("%s: %d supervisor opens and %d closes", fs.label, len(open), len(close)))
			continue
		}
		if open[0].str("branch_id") != close[0].str("branch_id") {
			found = append(found, fs.label+": the close names another branch than the open")
		}
		for _, st := range fs.c.ofType("step") {
			if st.Seq < open[0].Seq || st.Seq > close[0].Seq {
				found = append(found, fmt.Sprintf("%s: step %d outside the branch (%d–%d)", fs.label, st.Seq, open[0].Seq, close[0].Seq))
			}
		}
		if t, ok := fs.c.terminal(); ok && t.Seq < close[0].Seq {
			found = append(found, fmt.Sprintf("%s: the branch closes at %d, after the terminal event %d", fs.label, close[0].Seq, t.Seq))
		}
	}
	return problems("one supervisor branch open before the first step and one close after the last, before the outcome", found,
		fmt.Sprintf("%d streams: one supervisor branch around every step", len(caps)))
}

func checkTerminalDone(ctx context.Context, s *session) verdict {
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	caps, found := completeCaptures(runs)
	for _, fs := range caps {
		ev := fs.c.Events
		var terminals []event
		for _, e := range ev {
			if isTerminal(e.Type) {
				terminals = append(terminals, e)
			}
		}
		dones := fs.c.ofType("done")
		switch {
		case len(terminals) != 1 || len(dones) != 1:
			found = append(found, fmt.Sprintf("%s: %d terminal events and %d done", fs.label, len(terminals), len(dones)))
		case len(ev) < 2 || ev[len(ev)-1].Type != "done" || ev[len(ev)-2].Seq != terminals[0].Seq:
			found = append(found, fmt.Sprintf("%s: ends %s", fs.label, typesOf(ev[max(0, len(ev)-3):])))
		case dones[0].str("outcome") != terminals[0].Type:
			found = append(found, fmt.Sprintf("%s: done.outcome %q after %s", fs.label, dones[0].str("outcome"), terminals[0].Type))
		}
		if fs.c.OpenAfterDone {
			found = append(found, fs.label+": the stream stayed open after done")
		}
	}
	return problems("exactly one terminal event, then exactly one done, last, then the end of the stream", found,
		fmt.Sprintf("%d streams: one terminal event, then one done, last; closed", len(caps)))
}

func checkDoneSteps(ctx context.Context, s *session) verdict {
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	caps, found := completeCaptures(runs)
	for _, fs := range caps {
		d, ok := fs.c.done()
		if !ok {
			found = append(found, fs.label+": no done")
			continue
		}
		seen, missing := int64(len(fs.c.ofType("step"))), int64(len(fs.c.missing()))
		if steps := d.num("steps"); steps != seen+missing {
			found = append(found, fmt.Sprintf("%s: done.steps %d, but %d step events and %d evicted", fs.label, steps, seen, missing))
		}
	}
	return problems("done.steps to count every step emitted, retained or evicted", found,
		fmt.Sprintf("%d streams: done.steps = steps carried + steps evicted", len(caps)))
}

func checkOverflow(ctx context.Context, s *session) verdict {
	var runs []*run
	if s.cfg.OverflowURL != "" {
		r, err := s.overflowRun(ctx)
		if err != nil {
			return broken(err)
		}
		runs = []*run{r}
	} else {
		all, err := s.allRuns(ctx)
		if err != nil {
			return broken(err)
		}
		runs = all
	}
	caps, found := completeCaptures(runs)
	overflowed := 0
	for _, fs := range caps {
		found = append(found, evictionProblems(fs.label, fs.c, fs.run.bound, fs.c == fs.run.final)...)
		m := fs.c.missing()
		if len(m) == 0 {
			continue
		}
		overflowed++
		d, ok := fs.c.done()
		if !ok {
			found = append(found, fs.label+": no done")
			continue
		}
		steps := fs.c.ofType("step")
		if evicted := d.num("steps") - int64(len(steps)); int64(len(m)) != evicted {
			found = append(found, fmt.Sprintf("%s: %d seqs missing (%s) but %d steps evicted", fs.label, len(m), seqList(m), evicted))
		}
		// Oldest first is a property of the log: a live reader may have read a step before it
		// was evicted, so only the stream read after done shows it.
		if fs.c == fs.run.final && len(steps) > 0 && m[len(m)-1] > steps[0].Seq {
			found = append(found, fmt.Sprintf("%s: seq %d is missing after the retained step %d (not oldest first)", fs.label, m[len(m)-1], steps[0].Seq))
		}
		if fs.c != fs.run.live && fs.run.live != nil && len(fs.run.live.missing()) == 0 {
			if got, want := nonSteps(fs.c.Events), nonSteps(fs.run.live.Events); !slices.Equal(got, want) {
				found = append(found, fmt.Sprintf("%s: non-step events %v, live %v", fs.label, got, want))
			}
		}
	}
	if overflowed == 0 && len(found) == 0 {
		if s.cfg.OverflowURL != "" {
			return fail("the run at OverflowURL to have more events than the target retains", "nothing was evicted")
		}
		return skip("no run had more steps than the target retains; give OverflowURL (--overflow-url), the target started with a small DAS_ASK_MAX_EVENTS such as 8")
	}
	return problems("only step events missing, oldest first, as many as done.steps says were evicted and no more than the bound lets be", found,
		fmt.Sprintf("%d streams overflowed the buffer: only the oldest steps were missing", overflowed))
}
