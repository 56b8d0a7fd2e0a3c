package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The phase checks. Phase 1 (the default): every run has the one supervisor branch and nothing
// else, no step or milestone names a branch, and divergence is null. Phase 2 (Config.Phase2): a
// `source` branch per configured source inside the supervisor's, each opened once before its
// first step and closed once after its last; every step and milestone names a branch open at
// that point; divergence on the wrong-winner question and null where the catalog changes
// nothing; and cancel closes every open branch before error{cancelled}.

// branchSpan is one branch of a stream: where it opened and closed (0 when it did not).
type branchSpan struct {
	id, role, source string
	// parent is the branch it names as the one it runs inside, "" when it names none.
	parent        string
	open, close   int64
	opens, closes int
}

// branchSpans reads every branch of a stream, in order of opening.
func branchSpans(c *capture) []*branchSpan {
	var out []*branchSpan
	byID := map[string]*branchSpan{}
	for _, e := range c.ofType("branch") {
		id := e.str("branch_id")
		b := byID[id]
		if b == nil {
			b = &branchSpan{id: id, role: e.str("role"), source: e.str("source"), parent: e.str("parent")}
			byID[id] = b
			out = append(out, b)
		}
		if e.str("state") == "open" {
			b.opens++
			if b.open == 0 {
				b.open = e.Seq
			}
		} else {
			b.closes++
			b.close = e.Seq
		}
	}
	return out
}

func checkBranchPerSource(ctx context.Context, s *session) verdict {
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	caps, found := completeCaptures(runs)
	for _, fs := range caps {
		spans := branchSpans(fs.c)
		var sup *branchSpan
		for _, b := range spans {
			if b.role == "supervisor" {
				sup = b
			}
		}
		if sup == nil || sup.close == 0 {
			found = append(found, fs.label+": no supervisor branch opened and closed")
			continue
		}
		if !s.cfg.Phase2 {
			for _, b := range spans {
				if b != sup {
					found = append(found, fmt.Sprintf("%s: a %s branch %q in a phase-1 run", fs.label, b.role, b.id))
				}
			}
			continue
		}
		var sources []string
		for _, b := range spans {
			if b == sup {
				continue
			}
			switch {
			case b.opens != 1 || b.closes != 1:
				found = append(found, fmt.Sprintf("%s: branch %s opened %d and closed %d times", fs.label, b.id, b.opens, b.closes))
			case b.open < sup.open || b.close > sup.close:
				found = append(found, fmt.Sprintf("%s: branch %s (%d–%d) outside the supervisor's (%d–%d)", fs.label, b.id, b.open, b.close, sup.open, sup.close))
			case b.parent != "" && b.parent != sup.id:
				// Every branch below the supervisor's runs inside it (the contract: parent b1).
				found = append(found, fmt.Sprintf("%s: branch %s names parent %q, not the supervisor's %s", fs.label, b.id, b.parent, sup.id))
			}
			if b.role == "source" {
				if b.source == "" {
					found = append(found, fmt.Sprintf("%s: source branch %s names no source", fs.label, b.id))
				}
				sources = append(sources, b.source)
			}
		}
		slices.Sort(sources)
		if d := slices.Compact(slices.Clone(sources)); len(d) != len(sources) {
			found = append(found, fmt.Sprintf("%s: two branches for one source: %v", fs.label, sources))
		}
		// A run that ended in an outcome of its own had every branch; one cancelled or failed
		// may have ended before some opened.
		t, _ := fs.c.terminal()
		if want := s.sortedSources(); len(want) > 0 && t.Type != "error" && !slices.Equal(sources, want) {
			found = append(found, fmt.Sprintf("%s: source branches for %v, want one per configured source %v", fs.label, sources, want))
		}
		if len(sources) == 0 && t.Type != "error" {
			found = append(found, fs.label+": no source branch in a phase-2 run")
		}
	}
	if s.cfg.Phase2 {
		return problems("one source branch per configured source, each opened once and closed once inside the supervisor's", found,
			fmt.Sprintf("%d streams: a branch per source inside the supervisor's", len(caps)))
	}
	return problems("phase 1: the supervisor branch and no other", found,
		fmt.Sprintf("%d streams: the one supervisor branch (phase 1)", len(caps)))
}

func (s *session) sortedSources() []string {
	out := slices.Clone(s.cfg.Sources)
	slices.Sort(out)
	return out
}

func checkEventsNameBranches(ctx context.Context, s *session) verdict {
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	caps, found := completeCaptures(runs)
	named := 0
	for _, fs := range caps {
		spans := map[string]*branchSpan{}
		for _, b := range branchSpans(fs.c) {
			spans[b.id] = b
		}
		for _, e := range fs.c.Events {
			if e.Type != "step" && e.Type != "milestone" {
				continue
			}
			id, has := e.Obj["branch_id"].(string)
			if !s.cfg.Phase2 {
				if _, present := e.Obj["branch_id"]; present {
					found = append(found, fmt.Sprintf("%s: %s %d names branch %v in a phase-1 run", fs.label, e.Type, e.Seq, e.Obj["branch_id"]))
				}
				continue
			}
			b := spans[id]
			switch {
			case !has:
				found = append(found, fmt.Sprintf("%s: %s %d names no branch", fs.label, e.Type, e.Seq))
			case b == nil:
				found = append(found, fmt.Sprintf("%s: %s %d names branch %q, which never opened", fs.label, e.Type, e.Seq, id))
			case e.Seq < b.open || (b.close != 0 && e.Seq > b.close):
				found = append(found, fmt.Sprintf("%s: %s %d in branch %s outside its span %d–%d", fs.label, e.Type, e.Seq, id, b.open, b.close))
			case b.role == "source" && b.source != "" && e.str("source") != b.source:
				// A source branch is a sub-agent with that source's tools only.
				found = append(found, fmt.Sprintf("%s: %s %d on source %q in branch %s, the branch of source %q", fs.label, e.Type, e.Seq, e.str("source"), id, b.source))
			default:
				named++
			}
		}
	}
	if s.cfg.Phase2 {
		return problems("every step and milestone to name a branch open at that point", found,
			fmt.Sprintf("%d streams, %d steps and milestones, each inside the branch it names", len(caps), named))
	}
	return problems("phase 1: no step or milestone names a branch", found,
		fmt.Sprintf("%d streams: no branch_id (phase 1)", len(caps)))
}

// branchesOpened is when the cancel fixture cancels in phase 2: once every configured source's
// branch (or, without Config.Sources, one source branch) has opened, so that cancel finds
// branches open; in phase 1 at the first event, as ever.
func (s *session) branchesOpened(c *capture) bool {
	if !s.cfg.Phase2 {
		return true
	}
	n := 0
	for _, e := range c.ofType("branch") {
		if e.str("role") == "source" && e.str("state") == "open" {
			n++
		}
	}
	return n >= max(1, len(s.cfg.Sources))
}

func checkCancelClosesBranches(ctx context.Context, s *session) verdict {
	cr, err := s.cancelRunFixture(ctx)
	if err != nil {
		return broken(err)
	}
	if cr.err != nil {
		return broken(cr.err)
	}
	live := cr.run.live
	if why := streamOK(live); why != "" {
		return fail("the stream of the cancelled run", why)
	}
	open := map[string]bool{}
	seen, atCancel := 0, 0
	for _, e := range live.Events {
		switch e.Type {
		case "branch":
			seen++
			if e.str("state") == "open" {
				open[e.str("branch_id")] = true
			} else {
				delete(open, e.str("branch_id"))
			}
			if cr.logged(e) {
				atCancel = len(open)
			}
		case "error":
			if e.str("kind") != "cancelled" {
				return fail("error{kind: cancelled}", "error{kind: "+e.str("kind")+"}")
			}
			if len(open) > 0 {
				ids := make([]string, 0, len(open))
				for id := range open {
					ids = append(ids, id)
				}
				slices.Sort(ids)
				return fail("every open branch closed before error{cancelled}", "still open: "+strings.Join(ids, ", "))
			}
			if s.cfg.Phase2 && atCancel < 2 {
				return fail("cancel to land while a source branch is open (phase 2)", fmt.Sprintf("%d branches open at cancel", atCancel))
			}
			return pass("%d branches open at cancel, %d branch events; every branch closed before error{cancelled}", atCancel, seen)
		}
	}
	return fail("error{kind: cancelled} on the cancelled run's stream", typesOf(live.Events))
}

func (s *session) wrongWinnerRun(ctx context.Context) (*run, error) {
	return s.wrong.get(ctx, func(ctx context.Context) (*run, error) {
		return s.fullRun(ctx, "wrong winner", A, "", s.cfg.Questions.WrongWinner)
	})
}

func checkDivergence(ctx context.Context, s *session) verdict {
	_, same, v, ok := terminalOfType(ctx, s.normalRun, "answer", "an answer", "an answer")
	if !ok {
		return v
	}
	_, wrong, v, ok := terminalOfType(ctx, s.wrongWinnerRun, "answer", "an answer to the wrong-winner question", "an answer to the wrong-winner question")
	if !ok {
		return v
	}
	if d, present := same.Obj["divergence"]; !present || d != nil {
		return fail("divergence null where the catalog changes nothing ("+s.cfg.Questions.Answer+")", fmt.Sprintf("%v", d))
	}
	d, present := wrong.Obj["divergence"]
	if !s.cfg.Phase2 {
		if !present || d != nil {
			return fail("divergence null in phase 1", fmt.Sprintf("%v", d))
		}
		return pass("divergence null on both questions (phase 1)")
	}
	div, isObj := d.(map[string]any)
	if !isObj {
		return fail("a divergence on the wrong-winner question", fmt.Sprintf("%v", d))
	}
	var found []string
	res, _ := div["result"].(map[string]any)
	rows, _ := res["rows"].([]any)
	if res == nil || rows == nil {
		found = append(found, "divergence.result holds no rows")
	}
	if sql, _ := div["sql"].([]any); len(sql) == 0 {
		found = append(found, "divergence.sql is empty")
	}
	terms := map[string]bool{}
	prov, _ := wrong.Obj["provenance"].([]any)
	for _, p := range prov {
		if m, ok := p.(map[string]any); ok {
			terms[fmt.Sprint(m["term"])] = true
		}
	}
	without, _ := div["without"].([]any)
	if len(without) == 0 {
		found = append(found, "divergence.without names no definition")
	}
	for _, w := range without {
		if !terms[fmt.Sprint(w)] {
			found = append(found, fmt.Sprintf("divergence.without names %v, which is not in the answer's provenance", w))
		}
	}
	ar, _ := wrong.Obj["result"].(map[string]any)
	a, _ := json.Marshal(ar["rows"])
	b, _ := json.Marshal(rows)
	if string(a) == string(b) {
		found = append(found, "divergence.result has the answer's own rows")
	}
	return problems("a divergence on the wrong-winner question (its result, sql and the definitions it did without) and null where the catalog changes nothing", found,
		fmt.Sprintf("without the catalog's definition of %v the answer would have been %s", without, b))
}
