package stack_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/webhook/webhooktest"
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
	c, cid := aliceConversation(ctx, t, s)
	bad, err := c.CreateAskWithResponse(ctx, cid, nil, gen.AskRequest{Question: "q", Webhook: &gen.WebhookRequest{Url: "http://127.0.0.1:1/elsewhere"}})
	if err != nil || bad.StatusCode() != http.StatusBadRequest {
		t.Fatalf("webhook outside the sink: %v %d, want 400", err, bad.StatusCode())
	}
	tk, err := c.CreateAskWithResponse(ctx, cid, nil, gen.AskRequest{
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

// TestStackWebhookSettingsFromConfig: the operator's webhook settings (DAS_ASK_WEBHOOK_*, read
// into Options.Config as askd reads them) apply in the dev stack beside its sink: an ask may
// name a receiver the allow-list admits, and the delivery verifies with the operator's secret;
// a receiver whose prefix has secrets of its own (DAS_ASK_WEBHOOK_ENDPOINT_SECRETS) gets its
// deliveries signed with those alone, which the shared secrets do not verify.
func TestStackWebhookSettingsFromConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	secret, own := webhooktest.Secret(), webhooktest.Secret()
	rcv, err := webhooktest.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	// Its own receiver verifies with its secret; a second one, holding only the shared secret,
	// sees the same deliveries' signatures as another receiver would, to forge them.
	ownRcv, err := webhooktest.New(own)
	if err != nil {
		t.Fatal(err)
	}
	defer ownRcv.Close()
	env := map[string]string{"DAS_ASK_WEBHOOK_ALLOW": rcv.URL() + "/hooks/," + ownRcv.URL() + "/team/", "DAS_ASK_WEBHOOK_SECRETS": secret,
		"DAS_ASK_WEBHOOK_ENDPOINT_SECRETS": ownRcv.URL() + "/team/ " + own}
	cfg, err := config.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	s, err := stack.Start(ctx, stack.Options{Config: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, cid := aliceConversation(ctx, t, s)
	tk, err := c.CreateAskWithResponse(ctx, cid, nil, gen.AskRequest{
		Question: "How many sev1 incidents did we have in 2026-Q2?", Webhook: &gen.WebhookRequest{Url: rcv.URL() + "/hooks/a"}})
	if err != nil || tk.JSON202 == nil {
		t.Fatalf("create ask with the operator's allowed webhook: %v %s", err, tk.Body)
	}
	for {
		st, err := c.GetAskWithResponse(ctx, tk.JSON202.Ticket, &gen.GetAskParams{Prefer: ptr("wait=5")})
		if err != nil || st.JSON200 == nil {
			t.Fatalf("status: %v", err)
		}
		if w := st.JSON200.Webhook; w != nil && w.State != gen.WebhookStatePending {
			if w.State != gen.WebhookStateDelivered {
				t.Fatalf("delivery %s", st.Body)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("not delivered: %s", st.Body)
		}
	}
	got := rcv.Deliveries()
	if len(got) != 1 || !got[0].Verified {
		t.Fatalf("receiver got %d deliveries (first verified: %v), want 1 verified with the operator's secret", len(got), len(got) > 0 && got[0].Verified)
	}

	tk, err = c.CreateAskWithResponse(ctx, cid, nil, gen.AskRequest{
		Question: "How many sev1 incidents did we have in 2026-Q2?", Webhook: &gen.WebhookRequest{Url: ownRcv.URL() + "/team/in"}})
	if err != nil || tk.JSON202 == nil {
		t.Fatalf("create ask with a receiver of its own secret: %v %s", err, tk.Body)
	}
	if _, err := c.GetAskWithResponse(ctx, tk.JSON202.Ticket, &gen.GetAskParams{Prefer: ptr("wait=30")}); err != nil {
		t.Fatal(err)
	}
	for {
		arrived := ownRcv.Arrived() // before the look, so that a delivery between the two is not missed
		if len(ownRcv.Deliveries()) > 0 || ctx.Err() != nil {
			break
		}
		select {
		case <-arrived:
		case <-ctx.Done():
		}
	}
	own1 := ownRcv.Deliveries()
	if len(own1) != 1 || !own1[0].Verified || len(strings.Fields(own1[0].Signature)) != 1 {
		var first webhooktest.Delivery
		if len(own1) > 0 {
			first = own1[0]
		}
		t.Fatalf("the receiver of its own secret got %d deliveries (first verified %v, signature %q), want 1 with one signature, its own", len(own1), first.Verified, first.Signature)
	}
	shared, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if shared.Verify(own1[0].Body, own1[0].Header) == nil {
		t.Errorf("a delivery to a prefix with its own secret verifies with the shared secret: another receiver could forge it")
	}
}

// TestStackOnEveryInterface: ask-serve -addr 0.0.0.0:… starts (it refused, blaming
// DAS_ASK_WEBHOOK_ALLOW, for the dev sink's prefix was named by the unspecified address), its
// sink is named over loopback and admitted, and it warns that it listens beyond loopback.
func TestStackOnEveryInterface(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	logs := &logtest.Buffer{}
	s, err := stack.Start(ctx, stack.Options{AskAddr: "0.0.0.0:0", Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if u, err := url.Parse(s.WebhooksURL); err != nil || !netip.MustParseAddr(u.Hostname()).IsLoopback() {
		t.Errorf("the sink is at %s, want it named over loopback", s.WebhooksURL)
	}
	if !strings.Contains(logs.String(), "listening beyond loopback") {
		t.Errorf("no warning of a listener beyond loopback: %s", logs.String())
	}
	c, cid := aliceConversation(ctx, t, s)
	tk, err := c.CreateAskWithResponse(ctx, cid, nil, gen.AskRequest{
		Question: "How many sev1 incidents did we have in 2026-Q2?", Webhook: &gen.WebhookRequest{Url: s.WebhooksURL + "inbox"}})
	if err != nil || tk.JSON202 == nil {
		t.Fatalf("an ask naming the sink: %v %s", err, tk.Body)
	}
}
