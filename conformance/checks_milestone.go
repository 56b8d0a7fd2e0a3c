package conformance

import (
	"context"
	"fmt"
)

// checkMilestoneBeforeStep: a milestone is what a person could be told now, so it is emitted
// when the work starts — before the tool call's step, which reports a call that has ended. In
// every stream read from the start, each step is preceded by a milestone of the same source
// emitted after that source's previous step. (A step evicted by the bound only makes this
// weaker, never wrong.)
func checkMilestoneBeforeStep(ctx context.Context, s *session) verdict {
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	caps, found := completeCaptures(runs)
	steps := 0
	for _, fs := range caps {
		announced := map[string]bool{} // source → a milestone since its last step
		for _, e := range fs.c.Events {
			switch e.Type {
			case "milestone":
				announced[e.str("source")] = true
			case "step":
				steps++
				src := e.str("source")
				if !announced[src] {
					found = append(found, fmt.Sprintf("%s: step %d (%s on %s) has no milestone of its source before it", fs.label, e.Seq, e.str("tool"), src))
				}
				announced[src] = false
			}
		}
	}
	if steps == 0 && len(found) == 0 {
		return skip("no run made a tool call, so no step could be checked")
	}
	return problems("every step preceded by a milestone of its source, emitted since that source's previous step", found,
		fmt.Sprintf("%d streams, %d steps: each announced by a milestone before it", len(caps), steps))
}
