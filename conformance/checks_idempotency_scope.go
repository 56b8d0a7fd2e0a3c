package conformance

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The Idempotency-Key checks (IETF draft-ietf-httpapi-idempotency-key-header) are made only when
// the published contract offers the header on the creating POSTs: an implementation of an
// earlier contract is skipped, saying so, never passed.

// idempotencyOffered reports whether the published contract takes Idempotency-Key on both
// creating POSTs, or why not.
func (s *session) idempotencyOffered(ctx context.Context) (bool, string) {
	c, err := s.schema(ctx)
	if err != nil {
		return false, "the published schema could not be loaded (see schema.published)"
	}
	for _, p := range []string{"/v1/conversations", "/v1/conversations/{conversation_id}/asks"} {
		item := c.doc.Paths.Find(p)
		if item == nil || item.Post == nil {
			return false, "the published schema has no POST " + p
		}
		found := false
		for _, prm := range item.Post.Parameters {
			if prm.Value != nil && prm.Value.In == "header" && strings.EqualFold(prm.Value.Name, "Idempotency-Key") {
				found = true
			}
		}
		if !found {
			return false, "the published contract does not offer Idempotency-Key on POST " + p
		}
	}
	return true, ""
}

// keyed is a header carrying an Idempotency-Key.
func keyed(key string) http.Header { return http.Header{"Idempotency-Key": {key}} }

// idempotencyRun is what the replay, reuse and identity checks look at.
type idempotencyRun struct {
	convKey, askKey string
	conv            [2]rawCall // createConversation twice with convKey
	ask             [2]rawCall // createAsk twice with askKey, the same body
	otherPath       rawCall    // createConversation with askKey
	asB             rawCall    // createConversation as B with convKey
	askAsB          rawCall    // createAsk as B, in B's own conversation, with askKey and A's body
}

func (s *session) idempotencyFixture(ctx context.Context) (*idempotencyRun, error) {
	return s.idem.get(ctx, func(ctx context.Context) (*idempotencyRun, error) {
		x := &idempotencyRun{convKey: "conformance-" + randomHex(), askKey: "conformance-" + randomHex()}
		var err error
		for i := range x.conv {
			if x.conv[i], err = s.do(ctx, A, http.MethodPost, "/v1/conversations", []byte(`{}`), keyed(x.convKey)); err != nil {
				return nil, err
			}
		}
		cid := jsonField(x.conv[0].body, "id")
		if x.conv[0].status != http.StatusCreated || cid == "" {
			return nil, fmt.Errorf("create a conversation with an Idempotency-Key: status %d, want 201 with an id", x.conv[0].status)
		}
		path := "/v1/conversations/" + cid + "/asks"
		body := []byte(`{"question":` + strconv.Quote(s.cfg.Questions.CatalogOnly) + `}`)
		for i := range x.ask {
			if x.ask[i], err = s.do(ctx, A, http.MethodPost, path, body, keyed(x.askKey)); err != nil {
				return nil, err
			}
		}
		if x.otherPath, err = s.do(ctx, A, http.MethodPost, "/v1/conversations", []byte(`{}`), keyed(x.askKey)); err != nil {
			return nil, err
		}
		if x.asB, err = s.do(ctx, B, http.MethodPost, "/v1/conversations", []byte(`{}`), keyed(x.convKey)); err != nil {
			return nil, err
		}
		if bc := jsonField(x.asB.body, "id"); x.asB.status == http.StatusCreated && bc != "" {
			if x.askAsB, err = s.do(ctx, B, http.MethodPost, "/v1/conversations/"+bc+"/asks", body, keyed(x.askKey)); err != nil {
				return nil, err
			}
		}
		for _, c := range []struct {
			who  Identity
			call rawCall
		}{{A, x.ask[0]}, {B, x.askAsB}} {
			if t := jsonField(c.call.body, "ticket"); t != "" {
				_ = s.stream(ctx, c.who, t, cursor{}, nil) // let the run end before the next check
			}
		}
		return x, nil
	})
}

// checkIdempotencyScope is what create.idempotency-key leaves out: a key belongs to its caller
// (B sending A's key is processed afresh and gets a conversation of its own), to one request
// (the key on the other creating POST is a 422), and a replay says it is one
// (Idempotent-Replayed: true on the retry, absent on the first answer).
func checkIdempotencyScope(ctx context.Context, s *session) verdict {
	if ok, why := s.idempotencyOffered(ctx); !ok {
		return skip("%s", why)
	}
	x, err := s.idempotencyFixture(ctx)
	if err != nil {
		return broken(err)
	}
	var found []string
	for _, c := range []struct {
		what, field string
		status      int
		calls       [2]rawCall
	}{
		{"createConversation", "id", http.StatusCreated, x.conv},
		{"createAsk", "ticket", http.StatusAccepted, x.ask},
	} {
		first, again := c.calls[0], c.calls[1]
		switch {
		case first.status != c.status:
			found = append(found, fmt.Sprintf("%s with a key: %d", c.what, first.status))
		case again.status != first.status || jsonField(again.body, c.field) != jsonField(first.body, c.field):
			found = append(found, fmt.Sprintf("%s retried with the same key: %d, not the first %s", c.what, again.status, c.field))
		case !strings.EqualFold(again.header.Get("Idempotent-Replayed"), "true"):
			found = append(found, fmt.Sprintf("%s's replay has Idempotent-Replayed %q", c.what, again.header.Get("Idempotent-Replayed")))
		case first.header.Get("Idempotent-Replayed") != "":
			found = append(found, fmt.Sprintf("%s's first answer says Idempotent-Replayed", c.what))
		}
	}
	if why := s.refusedWith(ctx, x.otherPath, http.MethodPost, "/v1/conversations", http.StatusUnprocessableEntity, false); why != "" {
		found = append(found, "createAsk's key sent on createConversation: "+why)
	}
	b := x.asB
	switch {
	case b.status != http.StatusCreated:
		found = append(found, fmt.Sprintf("B with A's key: %d, want 201", b.status))
	case jsonField(b.body, "id") == jsonField(x.conv[0].body, "id"):
		found = append(found, "B with A's key got A's conversation")
	case b.header.Get("Idempotent-Replayed") != "":
		found = append(found, "B with A's key got a replayed response")
	}
	// createAsk's keys too: B asking in B's own conversation with A's key and A's body.
	ba := x.askAsB
	switch {
	case b.status != http.StatusCreated:
	case ba.status != http.StatusAccepted:
		found = append(found, fmt.Sprintf("B's ask with A's ask key: %d, want 202", ba.status))
	case jsonField(ba.body, "ticket") == jsonField(x.ask[0].body, "ticket"):
		found = append(found, "B's ask with A's ask key got A's ticket")
	case ba.header.Get("Idempotent-Replayed") != "":
		found = append(found, "B's ask with A's ask key got a replayed response")
	}
	return problems("keys that are each caller's own and one request's, and replays marked Idempotent-Replayed: true", found,
		"replays marked Idempotent-Replayed: true (and first answers not); a key on the other POST 422; B with A's keys a conversation and a ticket of its own")
}
