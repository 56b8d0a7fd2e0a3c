package conformance

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/das-ask/ask/gen"
)

// checkIdempotencyKey: creation is retry-safe (the IETF Idempotency-Key draft). The same key
// and body answer the same conversation and the same ticket (the same status and body) and
// run one ask; the same key with another body is a 422; a key the contract's pattern refuses
// is a 400; all as problem+json.
func checkIdempotencyKey(ctx context.Context, s *session) verdict {
	if ok, why := s.idempotencyOffered(ctx); !ok {
		return skip("%s", why)
	}
	tok, err := s.token(ctx, A)
	if err != nil {
		return broken(err)
	}
	var found []string
	convKey := `"` + rand.Text() + `"`
	cp := &gen.CreateConversationParams{IdempotencyKey: &convKey}
	c1, err := s.api.CreateConversationWithResponse(ctx, cp, gen.CreateConversationRequest{}, bearer(tok))
	if err != nil {
		return broken(err)
	}
	c2, err := s.api.CreateConversationWithResponse(ctx, cp, gen.CreateConversationRequest{}, bearer(tok))
	if err != nil {
		return broken(err)
	}
	if c1.StatusCode() != http.StatusCreated || c1.JSON201 == nil {
		return broken(fmt.Errorf("create a conversation with an Idempotency-Key: status %d", c1.StatusCode()))
	}
	if c2.StatusCode() != http.StatusCreated || string(c2.Body) != string(c1.Body) {
		found = append(found, fmt.Sprintf("createConversation retried with its key: %d %s, first %s", c2.StatusCode(), c2.Body, c1.Body))
	}
	conv := c1.JSON201.Id

	askKey := rand.Text()
	ap := &gen.CreateAskParams{IdempotencyKey: &askKey}
	q := s.cfg.Questions.Answer
	r := &run{label: "idempotent ask", who: A, question: q, conv: conv, sent: time.Now()}
	a1, err := s.api.CreateAskWithResponse(ctx, conv, ap, gen.AskRequest{Question: q}, bearer(tok))
	r.admitted = time.Now()
	if err != nil {
		return broken(err)
	}
	if a1.StatusCode() != http.StatusAccepted || a1.JSON202 == nil {
		return broken(fmt.Errorf("ask with an Idempotency-Key: status %d", a1.StatusCode()))
	}
	r.ticket = *a1.JSON202
	a2, err := s.api.CreateAskWithResponse(ctx, conv, ap, gen.AskRequest{Question: q}, bearer(tok))
	if err != nil {
		return broken(err)
	}
	switch {
	case a2.StatusCode() == http.StatusConflict && problemType(a2.Body) == "urn:ask:problem:idempotency-key-in-progress":
		// The first is still being processed (a slow store): allowed, retried below once it ends.
	case a2.StatusCode() != http.StatusAccepted || string(a2.Body) != string(a1.Body):
		found = append(found, fmt.Sprintf("createAsk retried with its key: %d %s, first %s", a2.StatusCode(), a2.Body, a1.Body))
	}
	other, err := s.api.CreateAskWithResponse(ctx, conv, ap, gen.AskRequest{Question: q + " (another)"}, bearer(tok))
	if err != nil {
		return broken(err)
	}
	if other.StatusCode() != http.StatusUnprocessableEntity || mediaType(other.HTTPResponse.Header) != "application/problem+json" {
		found = append(found, fmt.Sprintf("the key with another body: %d %s, want 422 problem+json", other.StatusCode(), mediaType(other.HTTPResponse.Header)))
	}
	r.live = s.stream(ctx, A, r.ticket.Ticket, cursor{}, nil)
	s.settle(ctx, r)
	// After the run: the key still answers the first ticket, not a second ask.
	a3, err := s.api.CreateAskWithResponse(ctx, conv, ap, gen.AskRequest{Question: q}, bearer(tok))
	if err != nil {
		return broken(err)
	}
	if a3.StatusCode() != http.StatusAccepted || string(a3.Body) != string(a1.Body) {
		found = append(found, fmt.Sprintf("createAsk retried after its run ended: %d %s, first %s", a3.StatusCode(), a3.Body, a1.Body))
	}
	for _, bad := range []string{"has space", strings.Repeat("k", 256), `"unbalanced`} {
		b := bad
		resp, err := s.api.CreateConversationWithResponse(ctx, &gen.CreateConversationParams{IdempotencyKey: &b}, gen.CreateConversationRequest{}, bearer(tok))
		if err != nil {
			return broken(err)
		}
		if resp.StatusCode() != http.StatusBadRequest || mediaType(resp.HTTPResponse.Header) != "application/problem+json" {
			found = append(found, fmt.Sprintf("Idempotency-Key %.20q: %d, want 400 problem+json", bad, resp.StatusCode()))
		}
	}
	return problems("the same key and body answer the same conversation and ticket; another body 422; a bad key 400",
		found, "a retried createConversation and createAsk answered the same conversation and ticket, byte for byte; another body 422; bad keys 400")
}

// problemType is a problem+json body's type, or "".
func problemType(body []byte) string {
	var p gen.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		return ""
	}
	return p.Type
}
