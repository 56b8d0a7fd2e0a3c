package conformance

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// containsText reports whether any string in a decoded JSON value contains text, ignoring case.
func containsText(v any, text string) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(strings.ToLower(x), strings.ToLower(text))
	case map[string]any:
		for k, e := range x {
			if containsText(k, text) || containsText(e, text) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if containsText(e, text) {
				return true
			}
		}
	}
	return false
}

func checkPrivacy(ctx context.Context, s *session) verdict {
	// The cancelled run too: an error event, whose message is the service's own words.
	if _, err := s.cancelRunFixture(ctx); err != nil {
		return broken(err)
	}
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	questions := map[string]string{}
	for _, r := range runs {
		questions[r.ticket.Ticket] = r.question
	}
	exchanges, events := s.rec.snapshot()
	heads := s.rec.heads()
	var found []string
	carried, longest := 0, 0
	for _, e := range events {
		q, ok := questions[e.str("ticket")]
		if !ok {
			continue
		}
		if e.Type == "accepted" {
			if e.str("question") == q {
				carried++
			} else {
				found = append(found, fmt.Sprintf("accepted %d does not carry the question as asked", e.Seq))
			}
			continue
		}
		raw := decoded(string(e.Raw))
		if containsText(e.Obj, q) || strings.Contains(strings.ToLower(raw), strings.ToLower(q)) {
			found = append(found, fmt.Sprintf("%s event %d carries the question", e.Type, e.Seq))
			continue
		}
		if isTerminal(e.Type) && e.Type != "error" {
			continue // the outcome may restate the question in part, never in whole; an error's message is the service's own
		}
		n, part := carriesPart(q, raw)
		longest = max(longest, n)
		if part {
			found = append(found, fmt.Sprintf("%s event %d carries %d characters of the question in a row", e.Type, e.Seq, n))
		}
	}
	// The streams' comments (keep-alives, the opening line): no question, nor a part of one.
	comments := s.rec.streamComments()
	for _, c := range comments {
		q, ok := questions[c.Ticket]
		if !ok {
			continue
		}
		text := decoded(c.Text)
		if n, part := carriesPart(q, text); part || strings.Contains(strings.ToLower(text), strings.ToLower(q)) {
			found = append(found, fmt.Sprintf("a comment of a stream carries %d characters of its question", n))
		}
	}
	// Bodies and every header value, the streams' included: no question, nor a long part of
	// one (a status body's terminal member aside, held to the whole question above).
	for _, x := range exchanges {
		for _, q := range questions {
			if strings.Contains(strings.ToLower(decoded(string(x.Body))), strings.ToLower(q)) {
				found = append(found, fmt.Sprintf("the %d body of %s %s carries a question", x.Status, x.Method, templateOf(x)))
				break
			}
			n, part := carriesPart(q, decoded(withoutTerminal(x.Body)))
			longest = max(longest, n)
			if part {
				found = append(found, fmt.Sprintf("the %d body of %s %s carries %d characters of a question in a row", x.Status, x.Method, templateOf(x), n))
				break
			}
		}
		found = append(found, headerCarries(fmt.Sprintf("the %d of %s %s", x.Status, x.Method, templateOf(x)), x.Header, questions)...)
	}
	for _, h := range heads {
		found = append(found, headerCarries(fmt.Sprintf("the %d stream of GET %s", h.Status, templateOf(exchange{Method: http.MethodGet, Path: h.Path})), h.Header, questions)...)
	}
	if carried == 0 && len(found) == 0 {
		return fail("the accepted event to carry the question", "no accepted event with it")
	}
	return problems("the question in accepted and nowhere else (no header, and no run of 24 characters or over half of it outside the outcome)", found,
		fmt.Sprintf("%d events, %d comments, %d bodies and the headers of %d responses: the question only in accepted (%d times); the longest run of a question elsewhere but the outcome %d characters",
			len(events), len(comments), len(exchanges), len(exchanges)+len(heads), carried, longest))
}

// headerCarries lists the header values of one response that carry a question or a long part of one.
func headerCarries(what string, h http.Header, questions map[string]string) []string {
	var out []string
	for name, vs := range h {
		for _, v := range vs {
			v = decoded(v)
			for _, q := range questions {
				if n, part := carriesPart(q, v); part || strings.Contains(strings.ToLower(v), strings.ToLower(q)) {
					out = append(out, fmt.Sprintf("%s: header %s carries %d characters of a question", what, name, n))
					break
				}
			}
		}
	}
	return out
}

// bearerMarks are what betrays a bearer: the whole token, and its signature (the part of a JWT
// that no other text shares) when it has one.
func bearerMarks(tok string) []string {
	marks := []string{tok}
	if parts := strings.Split(tok, "."); len(parts) == 3 && len(parts[2]) >= 16 {
		marks = append(marks, parts[2])
	}
	return marks
}

// carrier reports whether a text holds one of marks (bearerMarks of the suite's tokens).
func carrier(marks []string) func(text string) bool {
	return func(text string) bool {
		for _, m := range marks {
			if m != "" && strings.Contains(text, m) {
				return true
			}
		}
		return false
	}
}

// checkBearerNotEchoed looks for A's and B's bearers in everything the suite received: every event,
// every body and every response header, the streams' included. Only the requests the suite
// sent carry them.
func checkBearerNotEchoed(ctx context.Context, s *session) verdict {
	if _, err := s.allRuns(ctx); err != nil {
		return broken(err)
	}
	var marks []string
	for _, who := range []Identity{A, B} {
		tok, err := s.token(ctx, who)
		if err != nil {
			return broken(err)
		}
		marks = append(marks, bearerMarks(tok)...)
	}
	carries := carrier(marks)
	exchanges, events := s.rec.snapshot()
	heads := s.rec.heads()
	var found []string
	for _, e := range events {
		if carries(string(e.Raw)) {
			found = append(found, fmt.Sprintf("%s event %d of a run carries a bearer", e.Type, e.Seq))
		}
	}
	comments := s.rec.streamComments()
	for _, c := range comments {
		if carries(c.Text) {
			found = append(found, "a comment of a stream carries a bearer")
		}
	}
	headers := func(what string, h http.Header) {
		for name, vs := range h {
			for _, v := range vs {
				if carries(v) {
					found = append(found, fmt.Sprintf("%s: header %s carries a bearer", what, name))
				}
			}
		}
	}
	for _, x := range exchanges {
		what := fmt.Sprintf("the %d of %s %s", x.Status, x.Method, templateOf(x))
		if carries(string(x.Body)) {
			found = append(found, what+": the body carries a bearer")
		}
		headers(what, x.Header)
	}
	for _, h := range heads {
		headers(fmt.Sprintf("the %d stream of GET %s", h.Status, templateOf(exchange{Method: http.MethodGet, Path: h.Path})), h.Header)
	}
	return problems("no bearer in any event, stream comment, body or response header", found,
		fmt.Sprintf("%d events, %d stream comments, %d bodies and the headers of %d responses: neither identity's bearer", len(events), len(comments), len(exchanges), len(exchanges)+len(heads)))
}
