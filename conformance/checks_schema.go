package conformance

import (
	"context"
	"fmt"
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
