package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
// Problem requires the member, so a problem without it is a failure too.
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
			Status *float64 `json:"status"`
		}
		switch err := json.Unmarshal(x.Body, &p); {
		case err != nil:
			found = append(found, fmt.Sprintf("%s %s %d: the body is not a JSON object", x.Method, templateOf(x), x.Status))
		case p.Status == nil:
			found = append(found, fmt.Sprintf("%s %s %d: no status member", x.Method, templateOf(x), x.Status))
		case *p.Status != float64(x.Status):
			found = append(found, fmt.Sprintf("%s %s %d: status member %v", x.Method, templateOf(x), x.Status, *p.Status))
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
	return problems("every problem+json's status member to be its HTTP status (RFC 9457)", found,
		fmt.Sprintf("%d problem+json bodies (HTTP %v): each status member the HTTP status", n, codes))
}
