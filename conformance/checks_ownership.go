package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sameAsGhost compares B's response on A's resource with B's response on one that never
// existed: both must be 404 problem+json, and equal once the ids are replaced.
func sameAsGhost(call string, code int, body []byte, h http.Header, id string, gCode int, gBody []byte, gh http.Header, gid string) []string {
	var out []string
	if code != http.StatusNotFound {
		out = append(out, fmt.Sprintf("%s answered %d", call, code))
	}
	if code != gCode {
		out = append(out, fmt.Sprintf("%s answered %d, and %d for an id that never existed", call, code, gCode))
	}
	if mt, gmt := mediaType(h), mediaType(gh); mt != gmt || mt != "application/problem+json" {
		out = append(out, fmt.Sprintf("%s Content-Type %q, and %q for an id that never existed", call, mt, gmt))
	}
	if !reflect.DeepEqual(normalProblem(body, id), normalProblem(gBody, gid)) {
		out = append(out, fmt.Sprintf("%s: the body differs from the one for an id that never existed", call))
	}
	if d := headerDiff(h, gh, id, gid); len(d) > 0 {
		out = append(out, fmt.Sprintf("%s: header %s differs from the one for an id that never existed", call, strings.Join(d, ", ")))
	}
	return out
}

// perResponse are the headers that differ between any two responses (or with the length of an
// id): they tell nothing of the resource.
var perResponse = map[string]bool{"Date": true, "X-Request-Id": true, "Content-Length": true, "Traceparent": true}

// headerDiff names the headers, but perResponse, whose values differ between h and gh (the
// ids replaced in each).
func headerDiff(h, gh http.Header, id, gid string) []string {
	names := map[string]bool{}
	for k := range h {
		names[http.CanonicalHeaderKey(k)] = true
	}
	for k := range gh {
		names[http.CanonicalHeaderKey(k)] = true
	}
	var out []string
	for k := range names {
		if perResponse[k] {
			continue
		}
		a, b := slices.Clone(h.Values(k)), slices.Clone(gh.Values(k))
		for i := range a {
			if id != "" {
				a[i] = strings.ReplaceAll(a[i], id, "{id}")
			}
		}
		for i := range b {
			if gid != "" {
				b[i] = strings.ReplaceAll(b[i], gid, "{id}")
			}
		}
		if !slices.Equal(a, b) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// normalProblem decodes a problem body with the id replaced and the instance removed.
func normalProblem(body []byte, id string) map[string]any {
	var m map[string]any
	if id != "" {
		body = bytes.ReplaceAll(body, []byte(id), []byte("{id}"))
	}
	if json.Unmarshal(body, &m) != nil {
		return map[string]any{"unparsable": string(body)}
	}
	delete(m, "instance")
	return m
}

// foreignWaitSlack is how much longer a foreign caller's Prefer: wait on someone's ticket may
// take than on a ticket that never existed: both are 404 at once.
const foreignWaitSlack = 500 * time.Millisecond

// foreignCall picks one of B's calls out of foreignCalls: its name, status, body and header.
type foreignCall func(f foreignCalls) (string, int, []byte, http.Header)

// foreignChecks compares B's calls on A's tickets with B's calls on a ticket that never existed.
func (s *session) foreignChecks(ctx context.Context, what string, picks ...foreignCall) verdict {
	found, err := s.foreignFindings(ctx, B, picks...)
	if err != nil {
		return broken(err)
	}
	return problems("404 for B on A's ticket, indistinguishable from a ticket that never existed", found,
		fmt.Sprintf("%s of A's ticket as B, running and done: 404 problem+json, the same as for a ticket that never existed", what))
}

// foreignFindings compares who's calls on A's tickets, running and done, with who's calls on a
// ticket that never existed, and lists every difference.
func (s *session) foreignFindings(ctx context.Context, who Identity, picks ...foreignCall) ([]string, error) {
	g, err := s.ghostFixture(ctx, who)
	if err != nil {
		return nil, err
	}
	var open *run
	var running foreignCalls
	if who == otherTenant {
		tr, err := s.tenantRunFixture(ctx)
		if err != nil {
			return nil, err
		}
		open, running = tr.run, tr.foreign
	} else {
		sr, err := s.slowRunFixture(ctx)
		if err != nil {
			return nil, err
		}
		open, running = sr.run, sr.foreign
	}
	r, err := s.normalRun(ctx)
	if err != nil {
		return nil, err
	}
	after := s.foreignView(ctx, who, r.ticket.Ticket)
	var found []string
	for _, x := range []struct {
		when   string
		f      foreignCalls
		ticket string
	}{{"while running", running, open.ticket.Ticket}, {"after done", after, r.ticket.Ticket}} {
		if x.f.err != nil {
			return nil, x.f.err
		}
		// Prefer: wait holds no one's 404 until the run ends: its timing would tell that the
		// ticket exists and runs.
		if x.f.waitedTook > g.calls.waitedTook+foreignWaitSlack {
			found = append(found, fmt.Sprintf("GET status with Prefer: %s %s took %s, and %s for a ticket that never existed",
				preferWaitForeign, x.when, x.f.waitedTook.Round(time.Millisecond), g.calls.waitedTook.Round(time.Millisecond)))
		}
		for _, pick := range picks {
			call, code, body, h := pick(x.f)
			_, gCode, gBody, gh := pick(g.calls)
			found = append(found, sameAsGhost(call+" "+x.when, code, body, h, x.ticket, gCode, gBody, gh, g.ticket)...)
		}
	}
	return found, nil
}

// The calls foreignChecks compares, by what they ask of a ticket.
var (
	eventsCalls = []foreignCall{
		func(f foreignCalls) (string, int, []byte, http.Header) {
			return "GET events", f.events.Status, f.events.Body, f.events.Header
		},
		func(f foreignCalls) (string, int, []byte, http.Header) {
			return "GET events with Last-Event-ID: " + beyondCursor, f.beyondByHeader.Status, f.beyondByHeader.Body, f.beyondByHeader.Header
		},
		func(f foreignCalls) (string, int, []byte, http.Header) {
			return "GET events?after=" + beyondCursor, f.beyondByQuery.Status, f.beyondByQuery.Body, f.beyondByQuery.Header
		},
		func(f foreignCalls) (string, int, []byte, http.Header) {
			return "HEAD events", f.headEvents.status, nil, f.headEvents.header
		},
	}
	statusCalls = []foreignCall{
		func(f foreignCalls) (string, int, []byte, http.Header) {
			return "GET status", f.statusCode, f.statusBody, f.statusHeader
		},
		func(f foreignCalls) (string, int, []byte, http.Header) {
			return "HEAD status", f.headStatus.status, nil, f.headStatus.header
		},
		func(f foreignCalls) (string, int, []byte, http.Header) {
			return "GET status with Prefer: " + preferWaitForeign, f.waitedCode, f.waitedBody, f.waitedHeader
		},
	}
	cancelCalls = []foreignCall{
		func(f foreignCalls) (string, int, []byte, http.Header) {
			return "POST cancel", f.cancelCode, f.cancelBody, f.cancelHeader
		},
	}
)

func checkOwnershipEvents(ctx context.Context, s *session) verdict {
	return s.foreignChecks(ctx, "GET events (from the start, Last-Event-ID: "+beyondCursor+", ?after="+beyondCursor+") and HEAD events", eventsCalls...)
}

func checkOwnershipStatus(ctx context.Context, s *session) verdict {
	return s.foreignChecks(ctx, "GET and HEAD status", statusCalls...)
}

func checkOwnershipCancel(ctx context.Context, s *session) verdict {
	v := s.foreignChecks(ctx, "POST cancel", cancelCalls...)
	if v.status != Pass {
		return v
	}
	// B's cancel must not have touched A's run.
	sr, _ := s.slowRunFixture(ctx)
	if cancelled(sr.run) {
		return fail("A's run to be untouched by B's cancel", "it ended in error{kind: cancelled}")
	}
	return v
}

// cancelled reports whether r ended in error{kind: cancelled}: for a run no one but a foreign
// caller tried to cancel, that caller's cancel reached it.
func cancelled(r *run) bool {
	t, ok := r.final.terminal()
	return ok && t.Type == "error" && t.str("kind") == "cancelled"
}

func checkOwnershipConversation(ctx context.Context, s *session) verdict {
	found, err := s.foreignAsk(ctx, B)
	if err != nil {
		return broken(err)
	}
	return problems("404 for B asking in A's conversation, indistinguishable from a conversation that never existed", found,
		"B asking in A's conversation: 404 problem+json, the same as for a conversation that never existed")
}

// foreignAsk is who asking in A's conversation, compared with who asking in one that never
// existed.
func (s *session) foreignAsk(ctx context.Context, who Identity) ([]string, error) {
	g, err := s.ghostFixture(ctx, who)
	if err != nil {
		return nil, err
	}
	r, err := s.normalRun(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := s.token(ctx, who)
	if err != nil {
		return nil, err
	}
	resp, err := s.api.CreateAskWithResponse(ctx, r.conv, nil, askBody(s.cfg.Questions.Answer), bearer(tok))
	if err != nil {
		return nil, err
	}
	found := sameAsGhost("POST asks", resp.StatusCode(), resp.Body, resp.HTTPResponse.Header, r.conv, g.askCode, g.askBody, g.askHeader, g.conv)
	// While A's ask runs in it too: a busy conversation is no more B's (no 409 naming A's ticket).
	if who == B {
		sr, err := s.slowRunFixture(ctx)
		if err != nil {
			return nil, err
		}
		if sr.foreignErr != nil {
			return nil, sr.foreignErr
		}
		fa := sr.foreignAsk
		found = append(found, sameAsGhost("POST asks while A's ask runs in it", fa.status, fa.body, fa.header, sr.run.conv, g.askCode, g.askBody, g.askHeader, g.conv)...)
	}
	// Whatever a GET on a conversation answers (the contract offers none), it answers alike
	// for A's and for one that never existed: no listing of A's asks, nor a sign that it exists.
	gets, err := s.convGets(ctx, who, r.conv)
	if err != nil {
		return nil, err
	}
	for i, x := range gets {
		gx := g.convGets[i]
		switch {
		case x.status != gx.status:
			found = append(found, fmt.Sprintf("%s answered %d, and %d for a conversation that never existed", x.what, x.status, gx.status))
		case mediaType(x.header) != mediaType(gx.header):
			found = append(found, fmt.Sprintf("%s Content-Type %q, and %q for a conversation that never existed", x.what, mediaType(x.header), mediaType(gx.header)))
		case !bytes.Equal(bytes.ReplaceAll(x.body, []byte(r.conv), []byte("{id}")), bytes.ReplaceAll(gx.body, []byte(g.conv), []byte("{id}"))) &&
			!reflect.DeepEqual(normalProblem(x.body, r.conv), normalProblem(gx.body, g.conv)):
			found = append(found, x.what+": the body differs from the one for a conversation that never existed")
		}
	}
	return found, nil
}

// checkOwnershipTenant: a token for A's oid in another tenant is someone else. The target owns
// work by (tenant, oid), so that token is as foreign to A's ticket and conversation as B's: the
// same 404 as for ones that never existed, and its cancel leaves A's run alone. A target that
// keyed work by oid alone would hand A's work to every tenant's user with A's oid.
func checkOwnershipTenant(ctx context.Context, s *session) verdict {
	if _, err := s.token(ctx, otherTenant); errors.Is(err, ErrCannotMint) {
		return skip("the token source cannot mint A's oid in another tenant (tid %q); give an identity provider's mint URL that mints tid (--idp)", OtherTenantID)
	} else if err != nil {
		return broken(err)
	}
	found, err := s.foreignFindings(ctx, otherTenant, slices.Concat(statusCalls, eventsCalls, cancelCalls)...)
	if err != nil {
		return broken(err)
	}
	if tr, _ := s.tenantRunFixture(ctx); cancelled(tr.run) {
		found = append(found, "A's running ask, cancelled by A's oid in another tenant, ended in error{kind: cancelled}")
	}
	asked, err := s.foreignAsk(ctx, otherTenant)
	if err != nil {
		return broken(err)
	}
	found = append(found, asked...)
	return problems("404 for A's oid in another tenant (tid "+strconv.Quote(OtherTenantID)+") on A's ticket and conversation, indistinguishable from ones that never existed", found,
		"A's oid in another tenant (tid "+strconv.Quote(OtherTenantID)+"): GET and HEAD status, GET and HEAD events (from the start, Last-Event-ID: "+beyondCursor+", ?after="+beyondCursor+"), POST cancel of A's ticket, running and done, and POST asks in A's conversation: 404 problem+json, the same as for ones that never existed; A's run untouched")
}
