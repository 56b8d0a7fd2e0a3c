package conformance

import (
	"context"
	"fmt"
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
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	questions := map[string]string{}
	for _, r := range runs {
		questions[r.ticket.Ticket] = r.question
	}
	exchanges, events := s.rec.snapshot()
	var found []string
	carried := 0
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
		if containsText(e.Obj, q) || strings.Contains(strings.ToLower(string(e.Raw)), strings.ToLower(q)) {
			found = append(found, fmt.Sprintf("%s event %d carries the question", e.Type, e.Seq))
		}
	}
	for _, x := range exchanges {
		for _, q := range questions {
			if strings.Contains(strings.ToLower(string(x.Body)), strings.ToLower(q)) {
				found = append(found, fmt.Sprintf("the %d body of %s %s carries a question", x.Status, x.Method, templateOf(x)))
				break
			}
		}
	}
	if carried == 0 && len(found) == 0 {
		return fail("the accepted event to carry the question", "no accepted event with it")
	}
	return problems("the question in accepted and nowhere else", found,
		fmt.Sprintf("%d events and %d bodies: the question only in accepted (%d times)", len(events), len(exchanges), carried))
}
