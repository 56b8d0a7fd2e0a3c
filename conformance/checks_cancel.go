package conformance

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

func checkCancelStops(ctx context.Context, s *session) verdict {
	cr, err := s.cancelRunFixture(ctx)
	if err != nil {
		return broken(err)
	}
	if cr.err != nil {
		return broken(cr.err)
	}
	if code := cr.first.StatusCode(); code != http.StatusAccepted {
		return fail("202 for cancel of a running ask", fmt.Sprintf("%d", code))
	}
	live := cr.run.live
	if why := streamOK(live); why != "" {
		return fail("the stream of the cancelled run", why)
	}
	var found []string
	for _, e := range live.Events {
		// What arrived after the cancel was answered, less what the log held before it.
		if !e.At.After(cr.answered) || cr.logged(e) {
			continue
		}
		ok := e.Type == "error" || e.Type == "done" || (e.Type == "branch" && e.str("state") == "close")
		if !ok {
			found = append(found, fmt.Sprintf("%d:%s arrived after cancel", e.Seq, e.Type))
		}
	}
	n := len(live.Events)
	switch {
	case n < 2:
		found = append(found, "the stream ended with "+typesOf(live.Events))
	case live.Events[n-1].Type != "done" || live.Events[n-2].Type != "error" || live.Events[n-2].str("kind") != "cancelled":
		found = append(found, "the stream ended with "+typesOf(live.Events[max(0, n-3):]))
	}
	if !live.EOF {
		found = append(found, "the stream was not closed after done")
	}
	// Nor a tool call the stream does not show: a call already in flight completes, but none
	// starts once the cancel is answered (the source's audit log says when each started).
	calls, err := s.callsStartedAfterCancel(ctx, cr)
	if err != nil {
		return broken(err)
	}
	found = append(found, calls...)
	return problems("after cancel only the branch close, error{kind: cancelled}, then done, then the end of the stream, and no tool call started", found,
		fmt.Sprintf("cancelled during the silent wait: the stream ended %s", typesOf(live.Events[max(0, n-2):])))
}

func checkCancelIdempotent(ctx context.Context, s *session) verdict {
	cr, err := s.cancelRunFixture(ctx)
	if err != nil {
		return broken(err)
	}
	if cr.err != nil {
		return broken(cr.err)
	}
	var found []string
	for i, resp := range []interface {
		StatusCode() int
	}{cr.first, cr.second} {
		if resp.StatusCode() != http.StatusAccepted {
			found = append(found, fmt.Sprintf("cancel #%d answered %d", i+1, resp.StatusCode()))
		}
	}
	if b := cr.second.JSON202; b == nil || b.Ticket != cr.run.ticket.Ticket {
		found = append(found, "the second cancel's body does not name the ticket")
	}
	if f := cr.run.final; f != nil {
		if n := len(f.ofType("error")); n != 1 {
			found = append(found, fmt.Sprintf("%d error events after two cancels", n))
		}
		if n := len(f.ofType("done")); n != 1 {
			found = append(found, fmt.Sprintf("%d done events after two cancels", n))
		}
	}
	return problems("a second cancel to answer 202 for the ticket and change nothing", found,
		"two cancels: 202 each, one error, one done")
}

func checkCancelAfterDone(ctx context.Context, s *session) verdict {
	r, err := s.normalRun(ctx)
	if err != nil {
		return broken(err)
	}
	if r.status == nil {
		return fail("the status of the finished run", fmt.Sprintf("status %d", r.statusCode))
	}
	resp, err := s.cancel(ctx, r.who, r.ticket.Ticket)
	if err != nil {
		return broken(err)
	}
	var found []string
	if resp.StatusCode() != http.StatusAccepted {
		found = append(found, fmt.Sprintf("cancel after done answered %d", resp.StatusCode()))
	}
	st, code, err := s.status(ctx, r.who, r.ticket.Ticket)
	switch {
	case err != nil:
		return broken(err)
	case st == nil:
		found = append(found, fmt.Sprintf("status after the cancel answered %d", code))
	case st.State != r.status.State || st.LastSeq != r.status.LastSeq:
		found = append(found, fmt.Sprintf("the cancel changed the status from %s/%d to %s/%d", r.status.State, r.status.LastSeq, st.State, st.LastSeq))
	}
	return problems("cancel after done to answer 202 and change nothing", found,
		fmt.Sprintf("202, and the run stays %s with last_seq %d", r.status.State, r.status.LastSeq))
}

func checkBusy(ctx context.Context, s *session) verdict {
	sr, err := s.slowRunFixture(ctx)
	if err != nil {
		return broken(err)
	}
	if sr.conflictErr != nil {
		return broken(sr.conflictErr)
	}
	switch {
	case sr.conflictCode != http.StatusConflict:
		return fail("409 for a second ask while one runs in the conversation", fmt.Sprintf("%d", sr.conflictCode))
	case sr.conflict == nil:
		return fail("a problem+json body with the 409", "none")
	case sr.conflict.Ticket == nil || *sr.conflict.Ticket != sr.run.ticket.Ticket:
		return fail("the 409 to name the running ticket", "another ticket or none")
	}
	return pass("409 problem+json naming the running ticket")
}

// callsStartedAfterCancel lists the tool calls of the cancelled run's identity that a source
// audited as started after the cancel's 202 arrived (less ticketSlack, the clocks' and the
// answer's way) and ended by the run's done: none may, whether or not the stream shows them.
// Nothing without an audit log or an oid to read.
func (s *session) callsStartedAfterCancel(ctx context.Context, cr *cancelRun) ([]string, error) {
	if s.cfg.AuditURL == "" {
		return nil, nil
	}
	tok, err := s.token(ctx, cr.run.who)
	if err != nil {
		return nil, err
	}
	oid, err := oidOf(tok)
	if err != nil {
		return nil, nil
	}
	d, ok := cr.run.live.done()
	if !ok {
		return nil, nil
	}
	end, ok := eventTime(d)
	if !ok {
		return nil, nil
	}
	lines, err := s.auditOf(ctx, oid)
	if err != nil {
		return nil, err
	}
	var found []string
	for _, l := range lines {
		start := l.TS.Add(-time.Duration(l.Ms) * time.Millisecond)
		if start.After(cr.answered.Add(ticketSlack)) && !l.TS.After(end) {
			found = append(found, fmt.Sprintf("a %s call (audited) started %s after the cancel was answered", l.Tool, start.Sub(cr.answered).Round(time.Millisecond)))
		}
	}
	return found, nil
}
