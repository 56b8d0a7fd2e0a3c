package conformance

import "fmt"

// Eviction is the only thing that may take an event out of a stream, and only a step, and only
// once the run has emitted more events than the target holds. A gap in a stream is therefore
// evidence of eviction only when the count allows it: done's seq is how many events the run
// emitted (seq is gap-free at emission and done is last), so at most done.seq − MaxEvents of
// them can have been evicted. Anything more is an event the target lost.

// emitted is how many events the run of a capture emitted: done's seq, or 0 without a done.
func emitted(c *capture) int64 {
	d, ok := c.done()
	if !ok {
		return 0
	}
	return d.Seq
}

// evictable is how many events a log bounded at bound can have evicted after n were emitted.
func evictable(n int64, bound int) int64 {
	return max(0, n-int64(bound))
}

// evictionProblems checks a capture read from the start against the target's bound: it may
// skip no more seqs than the bound lets the log have evicted, and a stream read after done (the
// log itself) may hold more events than the bound only when nothing is left to evict: no step
// (the non-step events alone pass the bound, and none of them may be dropped).
func evictionProblems(label string, c *capture, bound int, afterDone bool) []string {
	n := emitted(c)
	if n == 0 || bound <= 0 {
		return nil
	}
	var out []string
	m := c.missing()
	if allowed := evictable(n, bound); int64(len(m)) > allowed {
		out = append(out, fmt.Sprintf("%s: %d seq values skipped (%s) in a run of %d events, where a bound of %d events (DAS_ASK_MAX_EVENTS) lets at most %d be evicted",
			label, len(m), seqList(m), n, bound, allowed))
	}
	if afterDone && len(c.Events) > bound {
		steps := 0
		for _, e := range c.Events {
			if e.Type == "step" {
				steps++
			}
		}
		if steps > 0 {
			out = append(out, fmt.Sprintf("%s: %d events retained, more than the bound of %d, %d of them steps that should have been evicted", label, len(c.Events), bound, steps))
		}
	}
	return out
}
