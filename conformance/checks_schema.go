package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

func (s *session) schema(ctx context.Context) (*contract, error) {
	return s.contract.get(ctx, s.loadContract)
}

func checkSchemaPublished(ctx context.Context, s *session) verdict {
	c, err := s.schema(ctx)
	if err != nil {
		return fail("GET /v1/openapi.yaml without a bearer to be a valid OpenAPI document with an Event schema", err.Error())
	}
	return pass("public, valid OpenAPI %s with %d paths and an Event schema of %d variants", c.doc.OpenAPI, c.doc.Paths.Len(), len(c.event.OneOf))
}

func checkBodies(ctx context.Context, s *session) verdict {
	c, err := s.schema(ctx)
	if err != nil {
		return skip("the published schema could not be loaded (see schema.published)")
	}
	if _, err := s.allRuns(ctx); err != nil {
		return broken(err)
	}
	exchanges, _ := s.rec.snapshot()
	if len(exchanges) == 0 {
		return skip("no JSON body was received")
	}
	var found []string
	for _, x := range exchanges {
		if err := c.validateExchange(ctx, x); err != nil {
			found = append(found, fmt.Sprintf("%s %s %d: %v", x.Method, templateOf(x), x.Status, err))
		}
	}
	return problems("every JSON body to match the published schema", found,
		fmt.Sprintf("%d JSON bodies match the published schema", len(exchanges)))
}

func checkEvents(ctx context.Context, s *session) verdict {
	c, err := s.schema(ctx)
	if err != nil {
		return skip("the published schema could not be loaded (see schema.published)")
	}
	if _, err := s.allRuns(ctx); err != nil {
		return broken(err)
	}
	_, events := s.rec.snapshot()
	if len(events) == 0 {
		return skip("no event was received")
	}
	var found []string
	for _, e := range events {
		if err := c.validateEvent(e); err != nil {
			found = append(found, fmt.Sprintf("event seq %d (%s): %v", e.Seq, e.Event, err))
		}
	}
	return problems("every event to match the published Event schema", found,
		fmt.Sprintf("%d events match the published Event schema", len(events)))
}

// templateOf names an exchange's operation by its path template, so no id reaches a detail.
func templateOf(x exchange) string {
	for _, op := range operations {
		if op.method == x.Method && op.pattern.MatchString(x.Path) {
			return op.template
		}
	}
	return x.Path
}

// checkProblemStatus holds every problem+json the suite received to RFC 9457 §3.1.2: its
// status member, when the response has one, is the HTTP status it came with. The contract's
// Problem requires the member, so a problem without it is a failure too. Its type and instance
// members, when present, are URI references (§3.1.1, §3.1.5): a decoded path (`<x>`, a space,
// `%2F` read as `/`, which names another resource) is not one.
func checkProblemStatus(ctx context.Context, s *session) verdict {
	if _, err := s.allRuns(ctx); err != nil {
		return broken(err)
	}
	exchanges, _ := s.rec.snapshot()
	var found []string
	n := 0
	statuses := map[int]bool{}
	for _, x := range exchanges {
		if mediaType(x.Header) != "application/problem+json" {
			continue
		}
		n++
		statuses[x.Status] = true
		var p struct {
			Status   *float64 `json:"status"`
			Type     *string  `json:"type"`
			Instance *string  `json:"instance"`
		}
		switch err := json.Unmarshal(x.Body, &p); {
		case err != nil:
			found = append(found, fmt.Sprintf("%s %s %d: the body is not a JSON object", x.Method, templateOf(x), x.Status))
		case p.Status == nil:
			found = append(found, fmt.Sprintf("%s %s %d: no status member", x.Method, templateOf(x), x.Status))
		case *p.Status != float64(x.Status):
			found = append(found, fmt.Sprintf("%s %s %d: status member %v", x.Method, templateOf(x), x.Status, *p.Status))
		}
		// The members are named, never quoted: an instance may carry an id of the caller's.
		if p.Type != nil && !uriReference(*p.Type) {
			found = append(found, fmt.Sprintf("%s %s %d: the type member is not a URI reference", x.Method, templateOf(x), x.Status))
		}
		if p.Instance != nil && !uriReference(*p.Instance) {
			found = append(found, fmt.Sprintf("%s %s %d: the instance member is not a URI reference", x.Method, templateOf(x), x.Status))
		}
	}
	if n == 0 {
		return skip("no problem+json was received")
	}
	codes := make([]int, 0, len(statuses))
	for c := range statuses {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return problems("every problem+json's status member to be its HTTP status, its type and instance URI references (RFC 9457)", found,
		fmt.Sprintf("%d problem+json bodies (HTTP %v): each status member the HTTP status, each type and instance a URI reference", n, codes))
}

// uriReference reports whether s is made only of what RFC 3986 lets a URI reference hold:
// unreserved and reserved characters, and percent-encodings of two hex digits. It does not
// check the grammar beyond that; what it rejects (spaces, `<`, `"`, non-ASCII, controls, a
// bare `%`) is what a decoded path puts there.
func uriReference(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0:
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			i += 2
		default:
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
