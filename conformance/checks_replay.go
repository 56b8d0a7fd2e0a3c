package conformance

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// replayPositions are the cursors to resume from after done: the start, the first event, a
// skipped seq (when steps were evicted), the middle, the one before done and done itself.
func replayPositions(final *capture) []int64 {
	d, ok := final.done()
	if !ok {
		return nil
	}
	pos := []int64{0, 1, d.Seq / 2, d.Seq - 1, d.Seq}
	if m := final.missing(); len(m) > 0 {
		pos = append(pos, m[0])
	}
	slices.Sort(pos)
	return slices.Compact(pos)
}

func (s *session) replayAfterDone(ctx context.Context, byQuery bool) verdict {
	r, err := s.normalRun(ctx)
	if err != nil {
		return broken(err)
	}
	if why := streamOK(r.final); why != "" {
		return fail("the run's stream after done", why)
	}
	positions := replayPositions(r.final)
	if positions == nil {
		return fail("the run to end in done", typesOf(r.final.Events))
	}
	var found []string
	for _, p := range positions {
		found = append(found, s.replayProblems(ctx, r, p, byQuery, "")...)
	}
	// A cursor at a seq the bound evicted (there is none at BaseURL, whose runs fit its
	// bound): the run at OverflowURL, from the first and the last seq it evicted. The log holds
	// no event with that seq; the replay still starts after it, never over from the start.
	evicted := ""
	if s.cfg.OverflowURL != "" {
		o, err := s.overflowRun(ctx)
		if err != nil {
			return broken(err)
		}
		if m := o.final.missing(); streamOK(o.final) == "" && len(m) > 0 {
			for _, p := range slices.Compact([]int64{m[0], m[len(m)-1]}) {
				found = append(found, s.overflowAt.replayProblems(ctx, o, p, byQuery, "at OverflowURL ")...)
			}
			evicted = fmt.Sprintf("; at OverflowURL from the evicted seqs %d and %d", m[0], m[len(m)-1])
		}
	}
	how := "Last-Event-ID"
	if byQuery {
		how = "?after="
	}
	return problems("a replay after done to carry exactly the retained events after the cursor, then close", found,
		fmt.Sprintf("%s from %v%s: exactly the retained events after each, then closed", how, positions, evicted))
}

// replayProblems replays r's finished stream after p, by header or query, and says how it
// differs from the retained events after p, or that it was not closed after done.
func (s *session) replayProblems(ctx context.Context, r *run, p int64, byQuery bool, where string) []string {
	cur := cursor{header: strconv.FormatInt(p, 10)}
	if byQuery {
		cur = cursor{query: strconv.FormatInt(p, 10)}
	}
	c := s.stream(ctx, r.who, r.ticket.Ticket, cur, nil)
	if why := streamOK(c); why != "" {
		return []string{fmt.Sprintf("%sfrom %d: %s", where, p, why)}
	}
	var found []string
	want := after(r.final.Events, p)
	if !slices.Equal(seqsOf(c.Events), seqsOf(want)) {
		found = append(found, fmt.Sprintf("%sfrom %d: [%s], want [%s]", where, p, typesOf(c.Events), typesOf(want)))
	}
	found = append(found, rewritten(fmt.Sprintf("%sfrom %d", where, p), c.Events, want)...)
	if !c.EOF {
		found = append(found, fmt.Sprintf("%sfrom %d: the stream was not closed after done", where, p))
	}
	return found
}

func checkReplayHeader(ctx context.Context, s *session) verdict {
	return s.replayAfterDone(ctx, false)
}

func checkReplayQuery(ctx context.Context, s *session) verdict {
	return s.replayAfterDone(ctx, true)
}

func checkReplayDuringRun(ctx context.Context, s *session) verdict {
	sr, err := s.slowRunFixture(ctx)
	if err != nil {
		return broken(err)
	}
	live := sr.run.live
	if why := streamOK(live); why != "" {
		return fail("the live stream", why)
	}
	want := nonSteps(after(live.Events, 1))
	var found []string
	for _, x := range []struct {
		how string
		c   *capture
	}{{"Last-Event-ID: 1", sr.byHeader}, {"?after=1", sr.byQuery}} {
		if why := streamOK(x.c); why != "" {
			found = append(found, x.how+": "+why)
			continue
		}
		if len(x.c.Events) == 0 {
			found = append(found, x.how+": no events")
			continue
		}
		if first := x.c.Events[0].Seq; first <= 1 {
			found = append(found, fmt.Sprintf("%s: began at seq %d", x.how, first))
		}
		joined := &capture{Events: append(slices.Clone(live.Events[:1]), x.c.Events...)}
		found = append(found, seqProblems(x.how+" joined to seq 1", joined, sr.run.bound)...)
		if got := nonSteps(x.c.Events); !slices.Equal(got, want) {
			found = append(found, fmt.Sprintf("%s: milestones, branches and outcome [%v], live [%v]", x.how, got, want))
		}
		found = append(found, rewritten(x.how, x.c.Events, live.Events)...)
		if !x.c.EOF {
			found = append(found, x.how+": not closed after done")
		}
	}
	return problems("a stream resumed after seq 1 while the run worked to continue it without gap or duplicate", found,
		fmt.Sprintf("resumed by Last-Event-ID and by ?after= while running: %d and %d events, no gap, no duplicate", len(sr.byHeader.Events), len(sr.byQuery.Events)))
}

func checkBadCursor(ctx context.Context, s *session) verdict {
	r, err := s.normalRun(ctx)
	if err != nil {
		return broken(err)
	}
	d, ok := r.final.done()
	if !ok {
		return fail("the run to end in done", typesOf(r.final.Events))
	}
	beyond := strconv.FormatInt(d.Seq+5, 10)
	// The first seq past done, too: an off-by-one in the bound (a cursor at last+1 taken as
	// the log's end, answered a 200 stream of nothing) passed with last+5 alone.
	next := strconv.FormatInt(d.Seq+1, 10)
	var found []string
	for _, x := range []struct {
		how string
		cur cursor
	}{
		{"Last-Event-ID: abc", cursor{header: "abc"}},
		{"Last-Event-ID: -1", cursor{header: "-1"}},
		{"?after=abc", cursor{query: "abc"}},
		{"Last-Event-ID beyond the last seq", cursor{header: beyond}},
		{"Last-Event-ID one past the last seq", cursor{header: next}},
		{"?after= one past the last seq", cursor{query: next}},
	} {
		c := s.stream(ctx, r.who, r.ticket.Ticket, x.cur, nil)
		if c.Status != http.StatusBadRequest || mediaType(c.Header) != "application/problem+json" {
			found = append(found, fmt.Sprintf("%s: %d %s", x.how, c.Status, mediaType(c.Header)))
		}
	}
	return problems("400 problem+json for a malformed cursor or one beyond the last seq", found,
		"400 problem+json for abc, -1, ?after=abc and a seq beyond done (done's seq + 1 and + 5)")
}

// checkHeaderWins sends both cursors at once, one different from the other: the contract says
// the Last-Event-ID header wins, so the replay starts after the header's seq, whichever of the
// two is the smaller.
func checkHeaderWins(ctx context.Context, s *session) verdict {
	r, err := s.normalRun(ctx)
	if err != nil {
		return broken(err)
	}
	if why := streamOK(r.final); why != "" {
		return fail("the run's stream after done", why)
	}
	d, ok := r.final.done()
	if !ok || d.Seq < 4 {
		return fail("the run to end in done after at least 4 events", typesOf(r.final.Events))
	}
	low, high := int64(1), d.Seq-2
	var found []string
	for _, p := range [][2]int64{{low, high}, {high, low}} {
		header, query := p[0], p[1]
		c := s.stream(ctx, r.who, r.ticket.Ticket, cursor{header: strconv.FormatInt(header, 10), query: strconv.FormatInt(query, 10)}, nil)
		how := fmt.Sprintf("Last-Event-ID: %d with ?after=%d", header, query)
		if why := streamOK(c); why != "" {
			found = append(found, how+": "+why)
			continue
		}
		if want := after(r.final.Events, header); !slices.Equal(seqsOf(c.Events), seqsOf(want)) {
			found = append(found, fmt.Sprintf("%s: [%s], want [%s]", how, typesOf(c.Events), typesOf(want)))
		}
	}
	return problems("the Last-Event-ID header to win over ?after= when both are given", found,
		fmt.Sprintf("Last-Event-ID %d with ?after=%d, and %d with %d: each replayed after the header's seq", low, high, high, low))
}

// rewritten names the events of got that differ from the event of the same seq in want, member
// by member: a replay carries the retained events, as they were first streamed, not events
// made again for it (a ts stamped when sent rather than when the seq was assigned, an outcome
// rebuilt), which a client reconnecting mid-run would join to what it already holds.
func rewritten(label string, got, want []event) []string {
	bySeq := map[int64]event{}
	for _, e := range want {
		bySeq[e.Seq] = e
	}
	var found []string
	for _, e := range got {
		w, ok := bySeq[e.Seq]
		if !ok || e.Obj == nil || w.Obj == nil || reflect.DeepEqual(e.Obj, w.Obj) {
			continue
		}
		found = append(found, fmt.Sprintf("%s: seq %d (%s) differs from the one first streamed in %s", label, e.Seq, e.Type, strings.Join(differingKeys(e.Obj, w.Obj), ", ")))
	}
	return found
}
