package conformance

import (
	"context"
	"fmt"
	"net/http"
)

// checkHeadLikeGet: HEAD is answered on every GET (RFC 9110 §9.3.2) with the status and
// Content-Type the GET would get, and no body. Asked as the owner of a finished ticket, on its
// status and its events (B's HEADs are judged with B's GETs, in ownership.*).
func checkHeadLikeGet(ctx context.Context, s *session) verdict {
	r, err := s.normalRun(ctx)
	if err != nil {
		return broken(err)
	}
	if r.final == nil || r.statusCode == 0 {
		return fail("the run's stream and status after done", "none")
	}
	var found []string
	for _, x := range []struct {
		what, path string
		status     int
		header     http.Header
	}{
		{"status", "/v1/asks/" + r.ticket.Ticket, r.statusCode, s.statusHeader(ctx, r)},
		{"events", "/v1/asks/" + r.ticket.Ticket + "/events", r.final.Status, r.final.Header},
	} {
		h, err := s.head(ctx, r.who, x.path)
		if err != nil {
			return broken(err)
		}
		if h.status != x.status {
			found = append(found, fmt.Sprintf("HEAD %s answered %d, GET %d", x.what, h.status, x.status))
		}
		if mt, gmt := mediaType(h.header), mediaType(x.header); mt != gmt {
			found = append(found, fmt.Sprintf("HEAD %s Content-Type %q, GET %q", x.what, mt, gmt))
		}
		if h.body != 0 {
			found = append(found, fmt.Sprintf("HEAD %s had a body of %d bytes", x.what, h.body))
		}
	}
	return problems("HEAD as the owner to answer as GET (status, Content-Type) with no body", found,
		"HEAD on a finished ticket's status and events, as its owner: the GET's status and Content-Type, no body")
}

// statusHeader is the header of the owner's GET of a run's status (nil if it failed).
func (s *session) statusHeader(ctx context.Context, r *run) http.Header {
	tok, err := s.token(ctx, r.who)
	if err != nil {
		return nil
	}
	resp, err := s.api.GetAskWithResponse(ctx, r.ticket.Ticket, nil, bearer(tok))
	if err != nil {
		return nil
	}
	return resp.HTTPResponse.Header
}
