package stack_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/gen"
)

// TestStackWebhookSink: an ask that names the dev stack's sink has its end delivered there,
// verified, and listed on the sink's page; a webhook anywhere else is a 400.
func TestStackWebhookSink(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s, err := stack.Start(ctx, stack.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	token, err := s.IdP.Mint(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	bearer := func(_ context.Context, r *http.Request) error {
		r.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
	c, err := gen.NewClientWithResponses(s.AskURL, gen.WithRequestEditorFn(bearer))
	if err != nil {
		t.Fatal(err)
	}
	conv, err := c.CreateConversationWithResponse(ctx, nil, gen.CreateConversationRequest{})
	if err != nil || conv.JSON201 == nil {
		t.Fatalf("create conversation: %v", err)
	}
	bad, err := c.CreateAskWithResponse(ctx, conv.JSON201.Id, nil, gen.AskRequest{Question: "q", Webhook: &gen.WebhookRequest{Url: "http://127.0.0.1:1/elsewhere"}})
	if err != nil || bad.StatusCode() != http.StatusBadRequest {
		t.Fatalf("webhook outside the sink: %v %d, want 400", err, bad.StatusCode())
	}
	tk, err := c.CreateAskWithResponse(ctx, conv.JSON201.Id, nil, gen.AskRequest{
		Question: "How many sev1 incidents did we have in 2026-Q2?", Webhook: &gen.WebhookRequest{Url: s.WebhooksURL + "inbox"}})
	if err != nil || tk.JSON202 == nil {
		t.Fatalf("create ask: %v %s", err, tk.Body)
	}
	for {
		st, err := c.GetAskWithResponse(ctx, tk.JSON202.Ticket, &gen.GetAskParams{Prefer: ptr("wait=5")})
		if err != nil || st.JSON200 == nil {
			t.Fatalf("status: %v", err)
		}
		if w := st.JSON200.Webhook; w != nil && w.State == gen.WebhookStateDelivered {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("not delivered: %s", st.Body)
		}
	}
	resp, err := http.Get(s.WebhooksURL + "?format=json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var entries []struct {
		Verified bool
		Ticket   string
		Outcome  string
	}
	if err := json.Unmarshal(b, &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || !entries[0].Verified || entries[0].Ticket != tk.JSON202.Ticket || entries[0].Outcome != "answer" {
		t.Fatalf("sink lists %s", b)
	}
}
