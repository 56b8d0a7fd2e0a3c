package conformance

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// fromStart is a capture read from seq 1, labelled for details.
type fromStart struct {
	label string
	run   *run
	c     *capture
}

// startCaptures returns the live and the after-done capture of every run.
func startCaptures(runs []*run) []fromStart {
	var out []fromStart
	for _, r := range runs {
		if r.live != nil {
			out = append(out, fromStart{r.label + " (live)", r, r.live})
		}
		if r.final != nil {
			out = append(out, fromStart{r.label + " (after done)", r, r.final})
		}
	}
	return out
}

// streamOK reports why a capture is not a stream at all, or "".
func streamOK(c *capture) string {
	switch {
	case c.Status != http.StatusOK:
		return fmt.Sprintf("status %d", c.Status)
	case c.Err != nil:
		return c.Err.Error()
	}
	return ""
}

func checkFirstAccepted(ctx context.Context, s *session) verdict {
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	var found []string
	for _, fs := range startCaptures(runs) {
		if why := streamOK(fs.c); why != "" {
			found = append(found, fs.label+": "+why)
			continue
		}
		if len(fs.c.Events) == 0 {
			found = append(found, fs.label+": no events")
			continue
		}
		if e := fs.c.Events[0]; e.Type != "accepted" || e.Seq != 1 {
			found = append(found, fmt.Sprintf("%s: first event %d:%s", fs.label, e.Seq, e.Type))
		}
		if n := len(fs.c.ofType("accepted")); n != 1 {
			found = append(found, fmt.Sprintf("%s: %d accepted events", fs.label, n))
		}
	}
	return problems("every stream to begin with accepted at seq 1, and carry it once", found,
		fmt.Sprintf("%d streams begin with accepted at seq 1", len(startCaptures(runs))))
}

func checkStreamHeaders(ctx context.Context, s *session) verdict {
	r, err := s.normalRun(ctx)
	if err != nil {
		return broken(err)
	}
	h := r.live.Header
	if h == nil {
		return fail("a 200 event stream", "no response: "+errText(r.live.Err))
	}
	// Every stream is held to it, not the first alone: the run's read after done, and two
	// resumed (by Last-Event-ID and by ?after=), besides every other the suite has read so far.
	s.stream(ctx, r.who, r.ticket.Ticket, cursor{header: "1"}, nil)
	s.stream(ctx, r.who, r.ticket.Ticket, cursor{query: "1"}, nil)
	var found []string
	n := 0
	for _, x := range s.rec.heads() {
		if x.Status != http.StatusOK {
			continue
		}
		n++
		var bad []string
		if mt := mediaType(x.Header); mt != "text/event-stream" {
			bad = append(bad, fmt.Sprintf("Content-Type %q", x.Header.Get("Content-Type")))
		}
		if !strings.Contains(strings.ToLower(x.Header.Get("Cache-Control")), "no-store") {
			bad = append(bad, fmt.Sprintf("Cache-Control %q", x.Header.Get("Cache-Control")))
		}
		if strings.ToLower(x.Header.Get("X-Accel-Buffering")) != "no" {
			bad = append(bad, fmt.Sprintf("X-Accel-Buffering %q", x.Header.Get("X-Accel-Buffering")))
		}
		if len(bad) > 0 {
			found = append(found, fmt.Sprintf("stream %d: %s", n, strings.Join(bad, ", ")))
		}
	}
	if len(found) > 0 {
		found = append([]string{fmt.Sprintf("%d of %d streams", len(found), n)}, found...)
	}
	return problems("Content-Type text/event-stream, Cache-Control no-store, X-Accel-Buffering no on every stream", found,
		fmt.Sprintf("%d streams (from the start, live and after done, and resumed): text/event-stream, Cache-Control: no-store, X-Accel-Buffering: no", n))
}

func errText(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}

func checkSeq(ctx context.Context, s *session) verdict {
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	var found []string
	evicted := 0
	for _, fs := range startCaptures(runs) {
		if why := streamOK(fs.c); why != "" {
			found = append(found, fs.label+": "+why)
			continue
		}
		found = append(found, seqProblems(fs.label, fs.c, fs.run.bound)...)
		if len(fs.c.missing()) > 0 {
			evicted++
		}
	}
	ok := fmt.Sprintf("%d streams: seq from 1, increasing, no gaps (bound %d events)", len(startCaptures(runs)), s.cfg.MaxEvents)
	if evicted > 0 {
		ok += fmt.Sprintf(" (in %d, gaps only where evicted steps were, in runs longer than the bound)", evicted)
	}
	return problems("seq to start at 1 and skip nothing but evicted steps", found, ok)
}

// streamRetry is the retry field the contract has every stream send (openapi: streamEvents).
const streamRetry = "2000"

func checkFraming(ctx context.Context, s *session) verdict {
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	sr, err := s.slowRunFixture(ctx)
	if err != nil {
		return broken(err)
	}
	r, err := s.normalRun(ctx)
	if err != nil {
		return broken(err)
	}
	var found []string
	n := 0
	for _, fs := range startCaptures(runs) {
		found = append(found, framingProblems(fs.label, fs.c, fs.run, &n)...)
	}
	// A resumed stream is framed as one read from the start: its id is the seq a browser
	// resumes after next time, so an id other than the seq on a resume alone loses or repeats
	// events at the following reconnect. Those resumed while the run worked, and after done.
	resumed := []struct {
		label string
		run   *run
		c     *capture
	}{
		{sr.run.label + " (Last-Event-ID: 1 while running)", sr.run, sr.byHeader},
		{sr.run.label + " (?after=1 while running)", sr.run, sr.byQuery},
		{r.label + " (Last-Event-ID: 1 after done)", r, s.stream(ctx, r.who, r.ticket.Ticket, cursor{header: "1"}, nil)},
		{r.label + " (?after=1 after done)", r, s.stream(ctx, r.who, r.ticket.Ticket, cursor{query: "1"}, nil)},
	}
	for _, fs := range resumed {
		if why := streamOK(fs.c); why != "" {
			found = append(found, fs.label+": "+why)
			continue
		}
		found = append(found, framingProblems(fs.label, fs.c, fs.run, &n)...)
	}
	return problems("every frame to be id: <seq>, event: <type>, one data line of the event's JSON, no id outside one, and retry: "+streamRetry, found,
		fmt.Sprintf("%d frames, from the start and resumed: id = seq, event = type, one data line, the run's ticket and conversation; retry: %s", n, streamRetry))
}

// framingProblems says how c's frames differ from the contract's framing, counting its events
// into n.
func framingProblems(label string, c *capture, r *run, n *int) []string {
	var found []string
	// An id outside an event frame (a keep-alive carrying one) is the last event id to a
	// browser: its reconnect resumes after that id, not after the last event it got.
	// The contract's reconnect delay: retry: 2000. A smaller one (retry: 0) has every client
	// of a broken stream reconnect at once, over and over.
	if streamOK(c) == "" {
		switch {
		case len(c.Retries) == 0:
			found = append(found, label+": no retry field")
		case slices.ContainsFunc(c.Retries, func(v string) bool { return v != streamRetry }):
			found = append(found, fmt.Sprintf("%s: retry %v, want %s", label, c.Retries, streamRetry))
		}
	}
	for i, f := range c.IDOnly {
		after := "the start"
		if k := c.IDOnlyAfter[i]; k > 0 {
			after = fmt.Sprintf("seq %d", c.Events[k-1].Seq)
		}
		found = append(found, fmt.Sprintf("%s: a frame with id %q and no data after %s (an EventSource resumes after that id)", label, f.ID, after))
	}
	for _, e := range c.Events {
		*n++
		switch {
		case e.Obj == nil:
			found = append(found, fmt.Sprintf("%s: a frame whose data is not a JSON object", label))
		case len(e.DataLines) != 1:
			found = append(found, fmt.Sprintf("%s: seq %d spans %d data lines", label, e.Seq, len(e.DataLines)))
		case !e.HasID || idSeq(e.frame) != e.Seq:
			found = append(found, fmt.Sprintf("%s: id %q for seq %d", label, e.ID, e.Seq))
		case e.Event != e.Type:
			found = append(found, fmt.Sprintf("%s: event %q for type %q (seq %d)", label, e.Event, e.Type, e.Seq))
		case e.str("ticket") != r.ticket.Ticket || e.str("conversation_id") != r.conv:
			found = append(found, fmt.Sprintf("%s: seq %d names another ticket or conversation", label, e.Seq))
		}
	}
	return found
}

func checkKeepAlive(ctx context.Context, s *session) verdict {
	sr, err := s.slowRunFixture(ctx)
	if err != nil {
		return broken(err)
	}
	if why := streamOK(sr.run.live); why != "" {
		return fail("a stream", why)
	}
	// Every wait between two events longer than the interval is judged: the comments in it, and
	// the longest silence (no frame at all) in it. On the live stream and on the two resumed
	// during the run (after seq 1, before the silent turn), which a resume path of their own
	// may leave without keep-alives.
	slack := s.cfg.KeepAlive/2 + 500*time.Millisecond
	var longest, worst time.Duration
	waits, comments := 0, 0
	var found []string
	for _, x := range []struct {
		label string
		c     *capture
	}{{"live", sr.run.live}, {"resumed by Last-Event-ID", sr.byHeader}, {"resumed by ?after=", sr.byQuery}} {
		c := x.c
		if c == nil || streamOK(c) != "" {
			continue // replay.during-run says why
		}
		prev := c.Start
		for i, e := range c.Events {
			gap := e.At.Sub(prev)
			longest = max(longest, gap)
			if gap > s.cfg.KeepAlive {
				waits++
				n, silence, last := 0, time.Duration(0), prev
				for j, cm := range c.Comments {
					if c.CommentAfter[j] == i {
						n++
						silence = max(silence, cm.At.Sub(last))
						last = cm.At
					}
				}
				silence = max(silence, e.At.Sub(last))
				comments += n
				worst = max(worst, silence)
				if n == 0 || silence > s.cfg.KeepAlive+slack {
					found = append(found, fmt.Sprintf("%s: %d comments during a %s wait before seq %d, the longest silence %s", x.label, n, gap.Round(time.Millisecond), e.Seq, silence.Round(time.Millisecond)))
				}
			}
			prev = e.At
		}
	}
	if waits == 0 {
		return skip("the longest wait between events was %s, not longer than the keep-alive interval %s; start the target with a shorter DAS_ASK_KEEPALIVE_S or give the slow question a longer wait", longest.Round(time.Millisecond), s.cfg.KeepAlive)
	}
	return problems(fmt.Sprintf("a keep-alive comment at least every %s during every silent wait", s.cfg.KeepAlive+slack), found,
		fmt.Sprintf("%d keep-alive comments during %d silent waits of the live and the resumed streams (the longest %s); longest silence %s (interval %s)", comments, waits, longest.Round(time.Millisecond), worst.Round(time.Millisecond), s.cfg.KeepAlive))
}

func checkDisconnect(ctx context.Context, s *session) verdict {
	sr, err := s.slowRunFixture(ctx)
	if err != nil {
		return broken(err)
	}
	if sr.dropped == nil || !sr.dropped.Stopped {
		return fail("a stream to close after its first event", "it could not be read")
	}
	t, why := outcome(sr.run)
	switch {
	case why != "":
		return fail("the run to end", why)
	case t.Type == "error" && t.str("kind") == "cancelled":
		return fail("the run to go on after a client left its stream", "error{kind: cancelled}")
	}
	return pass("a stream closed after its first event; the run went on to %s", t.Type)
}

// checkTSOrdered: the service stamps an event's ts when it assigns its seq, in one step, so
// along seq ts never decreases; the first is the ticket's created_at (the same clock, the same
// instant), and none comes after done's. Every stream read from the start, live and after done.
func checkTSOrdered(ctx context.Context, s *session) verdict {
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	var found []string
	n := 0
	for _, fs := range startCaptures(runs) {
		if streamOK(fs.c) != "" || len(fs.c.Events) == 0 {
			continue // events.first-accepted and events.seq-gap-free say why
		}
		created := fs.run.ticket.CreatedAt
		var prev time.Time
		var prevSeq int64
		d, hasDone := fs.c.done()
		doneAt, _ := eventTime(d)
		for _, e := range fs.c.Events {
			n++
			ts, ok := eventTime(e)
			if !ok {
				found = append(found, fmt.Sprintf("%s: seq %d ts %q is not a timestamp", fs.label, e.Seq, e.str("ts")))
				continue
			}
			switch {
			case ts.Before(created):
				found = append(found, fmt.Sprintf("%s: seq %d (%s) ts %s before the ticket's created_at", fs.label, e.Seq, e.Type, created.Sub(ts)))
			case !prev.IsZero() && ts.Before(prev):
				found = append(found, fmt.Sprintf("%s: seq %d (%s) ts %s before seq %d's", fs.label, e.Seq, e.Type, prev.Sub(ts), prevSeq))
			case hasDone && ts.After(doneAt):
				found = append(found, fmt.Sprintf("%s: seq %d (%s) ts %s after done's", fs.label, e.Seq, e.Type, ts.Sub(doneAt)))
			}
			prev, prevSeq = ts, e.Seq
		}
	}
	if n == 0 {
		return fail("streams with events to judge", "none")
	}
	return problems("ts never to decrease along seq, none before the ticket's created_at nor after done's", found,
		fmt.Sprintf("%d events of %d streams: ts in seq order, from the ticket's created_at to done's", n, len(startCaptures(runs))))
}
