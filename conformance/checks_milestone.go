package conformance

import (
	"context"
	"fmt"
)

// checkMilestoneBeforeStep: a milestone is what a person could be told now, so it is emitted
// when the work starts — before the tool call's step, which reports a call that has ended. In
// every stream read from the start, each step is preceded by a milestone of the same source
// and branch emitted after that source's previous step in that branch (phase 2's branches call
// one source at once). (A step evicted by the bound only makes this weaker, never wrong.)
func checkMilestoneBeforeStep(ctx context.Context, s *session) verdict {
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	caps, found := completeCaptures(runs)
	steps := 0
	for _, fs := range caps {
		// (branch, source) → a milestone since its last step. Phase 1 names no branch; in phase 2
		// branches call the same source concurrently, so each is announced in its own branch.
		announced := map[[2]string]bool{}
		for _, e := range fs.c.Events {
			key := [2]string{e.str("branch_id"), e.str("source")}
			switch e.Type {
			case "milestone":
				announced[key] = true
			case "step":
				steps++
				if !announced[key] {
					found = append(found, fmt.Sprintf("%s: step %d (%s on %s) has no milestone of its source before it", fs.label, e.Seq, e.str("tool"), key[1]))
				}
				announced[key] = false
			}
		}
	}
	if steps == 0 && len(found) == 0 {
		return skip("no run made a tool call, so no step could be checked")
	}
	return problems("every step preceded by a milestone of its source, emitted since that source's previous step", found,
		fmt.Sprintf("%d streams, %d steps: each announced by a milestone before it", len(caps), steps))
}
