package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
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

// foreignCall picks one of B's calls out of foreignCalls: its name, status, body and header.
type foreignCall func(f foreignCalls) (string, int, []byte, http.Header)

// foreignChecks compares B's calls on A's tickets with B's calls on a ticket that never existed.
func (s *session) foreignChecks(ctx context.Context, what string, picks ...foreignCall) verdict {
	g, err := s.ghostFixture(ctx)
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
	after := s.foreignView(ctx, r.ticket.Ticket)
	var found []string
	for _, x := range []struct {
		when   string
		f      foreignCalls
		ticket string
	}{{"while running", sr.foreign, sr.run.ticket.Ticket}, {"after done", after, r.ticket.Ticket}} {
		if x.f.err != nil {
			return broken(x.f.err)
		}
		for _, pick := range picks {
			call, code, body, h := pick(x.f)
			_, gCode, gBody, gh := pick(g.calls)
			found = append(found, sameAsGhost(call+" "+x.when, code, body, h, x.ticket, gCode, gBody, gh, g.ticket)...)
		}
	}
	return problems("404 for B on A's ticket, indistinguishable from a ticket that never existed", found,
		fmt.Sprintf("%s of A's ticket as B, running and done: 404 problem+json, the same as for a ticket that never existed", what))
}

func checkOwnershipEvents(ctx context.Context, s *session) verdict {
	return s.foreignChecks(ctx, "GET events (from the start, Last-Event-ID: "+beyondCursor+", ?after="+beyondCursor+") and HEAD events",
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
		})
}

func checkOwnershipStatus(ctx context.Context, s *session) verdict {
	return s.foreignChecks(ctx, "GET and HEAD status",
		func(f foreignCalls) (string, int, []byte, http.Header) {
			return "GET status", f.statusCode, f.statusBody, f.statusHeader
		},
		func(f foreignCalls) (string, int, []byte, http.Header) {
			return "HEAD status", f.headStatus.status, nil, f.headStatus.header
		})
}

func checkOwnershipCancel(ctx context.Context, s *session) verdict {
	v := s.foreignChecks(ctx, "POST cancel", func(f foreignCalls) (string, int, []byte, http.Header) {
		return "POST cancel", f.cancelCode, f.cancelBody, f.cancelHeader
	})
	if v.status != Pass {
		return v
	}
	// B's cancel must not have touched A's run.
	sr, _ := s.slowRunFixture(ctx)
	if t, ok := sr.run.final.terminal(); ok && t.Type == "error" && t.str("kind") == "cancelled" {
		return fail("A's run to be untouched by B's cancel", "it ended in error{kind: cancelled}")
	}
	return v
}

func checkOwnershipConversation(ctx context.Context, s *session) verdict {
	g, err := s.ghostFixture(ctx)
	if err != nil {
		return broken(err)
	}
	r, err := s.normalRun(ctx)
	if err != nil {
		return broken(err)
	}
	tok, err := s.token(ctx, B)
	if err != nil {
		return broken(err)
	}
	resp, err := s.api.CreateAskWithResponse(ctx, r.conv, nil, askBody(s.cfg.Questions.Answer), bearer(tok))
	if err != nil {
		return broken(err)
	}
	found := sameAsGhost("POST asks", resp.StatusCode(), resp.Body, resp.HTTPResponse.Header, r.conv, g.askCode, g.askBody, g.askHeader, g.conv)
	return problems("404 for B asking in A's conversation, indistinguishable from a conversation that never existed", found,
		"B asking in A's conversation: 404 problem+json, the same as for a conversation that never existed")
}
