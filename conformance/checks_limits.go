package conformance

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

func checkBodyTooLarge(ctx context.Context, s *session) verdict {
	l, stop := s.limitsTarget(ctx, s.cfg.Limits.MaxBodyBytes > 0, "DAS_ASK_MAX_BODY_BYTES", "--limits-max-body")
	if stop != nil {
		return *stop
	}
	conv, err := l.conversation(ctx, A)
	if err != nil {
		return broken(err)
	}
	over := s.cfg.Limits.MaxBodyBytes + 1
	var found []string
	for _, x := range []struct{ path, obj string }{
		{"/v1/conversations", `{}`},
		{"/v1/conversations/" + conv + "/asks", `{"question":"How many?"}`},
	} {
		c, err := l.do(ctx, A, http.MethodPost, x.path, padded(x.obj, over), nil)
		if err != nil {
			return broken(err)
		}
		if why := l.refusedWith(ctx, c, http.MethodPost, x.path, http.StatusRequestEntityTooLarge, false); why != "" {
			found = append(found, fmt.Sprintf("POST %s with %d bytes: %s", templateOf(exchange{Method: http.MethodPost, Path: x.path}), over, why))
		}
	}
	// Nothing half-created: the conversation took no ask, so one may run in it now.
	if len(found) == 0 {
		r, err := l.ask(ctx, "after the 413", A, conv, s.cfg.Questions.Answer)
		if err != nil {
			found = append(found, "after the 413 the conversation would not take an ask: "+err.Error())
		} else {
			_ = l.stream(ctx, A, r.ticket.Ticket, cursor{}, nil) // its end frees the in-flight slot
		}
	}
	return problems(fmt.Sprintf("413 problem+json for a body of %d bytes (the limit is %d), and nothing created", over, s.cfg.Limits.MaxBodyBytes), found,
		fmt.Sprintf("a body one byte over %d is 413 problem+json on both POSTs; the conversation then took an ask", s.cfg.Limits.MaxBodyBytes))
}

func checkInFlight(ctx context.Context, s *session) verdict {
	l, stop := s.limitsTarget(ctx, s.cfg.Limits.MaxInFlight > 0, "DAS_ASK_MAX_INFLIGHT_PER_ID", "--limits-max-inflight")
	if stop != nil {
		return *stop
	}
	d, err := s.deadlineFixture(ctx, l)
	if err != nil {
		return broken(err)
	}
	if d.overErr != nil {
		return broken(d.overErr)
	}
	if why := l.refusedWith(ctx, d.over, http.MethodPost, "/v1/conversations/x/asks", http.StatusTooManyRequests, true); why != "" {
		return fail(fmt.Sprintf("429 problem+json with Retry-After for ask %d while %d run", s.cfg.Limits.MaxInFlight+1, s.cfg.Limits.MaxInFlight), why)
	}
	return pass("with %d asks running, one more is 429 problem+json, Retry-After: %s", s.cfg.Limits.MaxInFlight, d.over.header.Get("Retry-After"))
}

func checkDeadline(ctx context.Context, s *session) verdict {
	l, stop := s.limitsTarget(ctx, s.cfg.Limits.Deadline > 0, "DAS_ASK_DEADLINE_S", "--limits-deadline")
	if stop != nil {
		return *stop
	}
	if s.cfg.Limits.Deadline >= s.cfg.SlowWait {
		return skip("the limits target's deadline %s does not end before the slow question's %s silence", s.cfg.Limits.Deadline, s.cfg.SlowWait)
	}
	d, err := s.deadlineFixture(ctx, l)
	if err != nil {
		return broken(err)
	}
	live := d.run.live
	if why := streamOK(live); why != "" {
		return fail("the slow run's stream", why)
	}
	n := len(live.Events)
	if n < 2 || live.Events[n-1].Type != "done" || live.Events[n-2].Type != "error" || live.Events[n-2].str("kind") != "timeout" {
		return fail(fmt.Sprintf("error{kind: timeout} then done after the %s deadline", s.cfg.Limits.Deadline),
			"the stream ended "+typesOf(live.Events[max(0, n-3):]))
	}
	from, ok1 := eventTime(live.Events[0])
	to, ok2 := eventTime(live.Events[n-2])
	if !ok1 || !ok2 {
		return fail("timestamps on accepted and error", "none that parse")
	}
	took, slack := to.Sub(from), deadlineSlack(s.cfg.Limits.Deadline)
	if took < s.cfg.Limits.Deadline-50*time.Millisecond || took > s.cfg.Limits.Deadline+slack {
		return fail(fmt.Sprintf("the timeout between %s and %s after accepted", s.cfg.Limits.Deadline, s.cfg.Limits.Deadline+slack),
			fmt.Sprintf("%s after", took.Round(time.Millisecond)))
	}
	if !live.EOF {
		return fail("the stream to close after done", "it stayed open")
	}
	return pass("the slow run ended error{kind: timeout} %s after accepted (deadline %s), then done, then the stream closed", took.Round(time.Millisecond), s.cfg.Limits.Deadline)
}

func checkTTL(ctx context.Context, s *session) verdict {
	l, stop := s.limitsTarget(ctx, s.cfg.Limits.TTL > 0, "DAS_ASK_TTL_S", "--limits-ttl")
	if stop != nil {
		return *stop
	}
	t, err := s.ttlFixture(ctx, l)
	if err != nil {
		return broken(err)
	}
	var found []string
	want := seqsOf(t.run.final.Events)
	switch {
	case streamOK(t.during) != "":
		found = append(found, fmt.Sprintf("the replay %s after done: %s", t.duringAt, streamOK(t.during)))
	case !slices.Equal(seqsOf(t.during.Events), want):
		found = append(found, fmt.Sprintf("the replay %s after done carried seqs %v, after done %v", t.duringAt, seqList(seqsOf(t.during.Events)), seqList(want)))
	}
	if t.duringStatus.status != http.StatusOK {
		found = append(found, fmt.Sprintf("the status %s after done: %d", t.duringAt, t.duringStatus.status))
	}
	path := "/v1/asks/" + t.run.ticket.Ticket
	if why := l.refusedWith(ctx, t.afterStatus, http.MethodGet, path, http.StatusNotFound, false); why != "" {
		found = append(found, fmt.Sprintf("the status %s after done (TTL %s): %s", t.afterAt, s.cfg.Limits.TTL, why))
	}
	if c := t.after; c.Status != http.StatusNotFound || mediaType(c.Header) != "application/problem+json" {
		found = append(found, fmt.Sprintf("the events %s after done (TTL %s): %d %s", t.afterAt, s.cfg.Limits.TTL, c.Status, mediaType(c.Header)))
	}
	return problems(fmt.Sprintf("a finished ticket to replay until its TTL (%s) and be 404 after it", s.cfg.Limits.TTL), found,
		fmt.Sprintf("replayed in full %s after done; 404 problem+json for status and events %s after (TTL %s)", t.duringAt, t.afterAt, s.cfg.Limits.TTL))
}

func checkCapacity(ctx context.Context, s *session) verdict {
	l, stop := s.limitsTarget(ctx, s.cfg.Limits.MaxTickets > 0, "DAS_ASK_MAX_TICKETS", "--limits-max-tickets")
	if stop != nil {
		return *stop
	}
	// Whatever the target already holds, MaxTickets+1 conversations opened one after the other
	// cannot all be held: the last, at least, is 503. Before the first 503 each is 201.
	var codes []string
	var refused rawCall
	for range s.cfg.Limits.MaxTickets + 1 {
		c, err := l.do(ctx, A, http.MethodPost, "/v1/conversations", []byte(`{}`), nil)
		if err != nil {
			return broken(err)
		}
		codes = append(codes, strconv.Itoa(c.status))
		if c.status != http.StatusCreated {
			refused = c
			break
		}
	}
	if refused.status == 0 {
		return fail(fmt.Sprintf("503 by conversation %d (DAS_ASK_MAX_TICKETS=%d)", s.cfg.Limits.MaxTickets+1, s.cfg.Limits.MaxTickets), strings.Join(codes, ","))
	}
	if why := l.refusedWith(ctx, refused, http.MethodPost, "/v1/conversations", http.StatusServiceUnavailable, true); why != "" {
		return fail("503 problem+json with Retry-After once the service holds DAS_ASK_MAX_TICKETS conversations", fmt.Sprintf("after %s: %s", strings.Join(codes[:len(codes)-1], ","), why))
	}
	return pass("conversation %d of %d opened in a row was 503 problem+json, Retry-After: %s (DAS_ASK_MAX_TICKETS=%d)", len(codes), s.cfg.Limits.MaxTickets+1, refused.header.Get("Retry-After"), s.cfg.Limits.MaxTickets)
}

// checkLocation: the 201 and the 202 carry Location, the created resource's address, which a
// client can follow from the request's URL (a gateway's prefix included).
func checkLocation(ctx context.Context, s *session) verdict {
	var found []string
	conv, err := s.do(ctx, A, http.MethodPost, "/v1/conversations", []byte(`{}`), nil)
	if err != nil {
		return broken(err)
	}
	var cid string
	if conv.status != http.StatusCreated {
		return fail("201 for a new conversation", strconv.Itoa(conv.status))
	}
	if b := jsonField(conv.body, "id"); b != "" {
		cid = b
	}
	convURL := s.cfg.BaseURL + "/v1/conversations"
	loc, err := resolve(convURL, conv.header.Get("Location"))
	switch {
	case conv.header.Get("Location") == "":
		found = append(found, "the 201 has no Location")
	case err != nil:
		found = append(found, "the 201's Location is not a URL reference")
	case loc != s.cfg.BaseURL+"/v1/conversations/"+cid+"/asks":
		found = append(found, fmt.Sprintf("the 201's Location resolves to %s, not the conversation's asks collection", strings.Replace(loc, cid, "{id}", 1)))
	}
	askPath := "/v1/conversations/" + cid + "/asks"
	if loc, err := resolve(convURL, jsonField(conv.body, "asks_url")); err != nil || loc != s.cfg.BaseURL+askPath {
		found = append(found, fmt.Sprintf("the 201's asks_url resolves to %s, not the conversation's asks collection", strings.Replace(loc, cid, "{id}", 1)))
	}
	tk, err := s.do(ctx, A, http.MethodPost, askPath, []byte(`{"question":`+strconv.Quote(s.cfg.Questions.CatalogOnly)+`}`), nil)
	if err != nil {
		return broken(err)
	}
	if tk.status != http.StatusAccepted {
		return fail("202 for an ask", strconv.Itoa(tk.status))
	}
	ticket := jsonField(tk.body, "ticket")
	if ticket == "" {
		return fail("a 202 body naming its ticket", string(tk.body))
	}
	loc, err = resolve(s.cfg.BaseURL+askPath, tk.header.Get("Location"))
	switch {
	case tk.header.Get("Location") == "":
		found = append(found, "the 202 has no Location")
	case err != nil:
		found = append(found, "the 202's Location is not a URL reference")
	case loc != s.cfg.BaseURL+"/v1/asks/"+ticket:
		found = append(found, fmt.Sprintf("the 202's Location resolves to %s, not the ticket's status", strings.Replace(loc, ticket, "{ticket}", 1)))
	default:
		st, err := s.do(ctx, A, http.MethodGet, strings.TrimPrefix(loc, s.cfg.BaseURL), nil, nil)
		if err != nil {
			return broken(err)
		}
		if st.status != http.StatusOK || jsonField(st.body, "ticket") != ticket {
			found = append(found, fmt.Sprintf("GET on the 202's Location answered %d", st.status))
		}
	}
	// The 202 body's addresses, resolved from the request URL as Location is: each must name the
	// ticket's stream, status and cancel, and answer for the ticket. The stream is read to its
	// end (the catalog question is quick), so the run is over before the next check.
	urls := map[string]string{}
	for _, x := range []struct{ field, want, what string }{
		{"events_url", "/v1/asks/" + ticket + "/events", "the ticket's events"},
		{"status_url", "/v1/asks/" + ticket, "the ticket's status"},
		{"cancel_url", "/v1/asks/" + ticket + "/cancel", "the ticket's cancel"},
	} {
		u, err := resolve(s.cfg.BaseURL+askPath, jsonField(tk.body, x.field))
		if err != nil || jsonField(tk.body, x.field) == "" || u != s.cfg.BaseURL+x.want {
			found = append(found, fmt.Sprintf("the 202's %s resolves to %s, not %s", x.field, strings.ReplaceAll(u, ticket, "{ticket}"), x.what))
			continue
		}
		urls[x.field] = strings.TrimPrefix(u, s.cfg.BaseURL)
	}
	if p, ok := urls["events_url"]; ok {
		ev, err := s.do(ctx, A, http.MethodGet, p, nil, nil)
		if err != nil {
			return broken(err)
		}
		if ev.status != http.StatusOK || mediaType(ev.header) != "text/event-stream" || !bytes.Contains(ev.body, []byte(`"ticket":"`+ticket+`"`)) {
			found = append(found, fmt.Sprintf("GET on the 202's events_url answered %d %s, not the ticket's events", ev.status, mediaType(ev.header)))
		}
	} else {
		_ = s.stream(ctx, A, ticket, cursor{}, nil) // let the run end before the next check
	}
	if p, ok := urls["status_url"]; ok {
		st, err := s.do(ctx, A, http.MethodGet, p, nil, nil)
		if err != nil {
			return broken(err)
		}
		if st.status != http.StatusOK || jsonField(st.body, "ticket") != ticket {
			found = append(found, fmt.Sprintf("GET on the 202's status_url answered %d", st.status))
		}
	}
	if p, ok := urls["cancel_url"]; ok {
		cn, err := s.do(ctx, A, http.MethodPost, p, nil, nil)
		if err != nil {
			return broken(err)
		}
		if cn.status != http.StatusAccepted || jsonField(cn.body, "ticket") != ticket {
			found = append(found, fmt.Sprintf("POST on the 202's cancel_url answered %d", cn.status))
		}
	}
	return problems("Location and asks_url on the 201 (the conversation's asks), Location and status_url, events_url and cancel_url on the 202 (the ticket's), followable from the request URL", found,
		"the 201's Location and asks_url are the conversation's asks collection; the 202's Location and status_url answer the ticket's status, its events_url its stream, its cancel_url its cancel")
}

// resolve resolves a Location reference against the request URL.
func resolve(base, ref string) (string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", err
	}
	return b.ResolveReference(r).String(), nil
}
