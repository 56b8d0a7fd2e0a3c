package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// TestClusterWebhookDelivererKilled: real askd processes on real Redis behind nginx. The
// replica whose deliverer holds a delivery is killed (SIGKILL) while its POST is open at the
// receiver; a surviving replica takes the lapsed claim and delivers under the same webhook-id.
// The receiver sees one delivery id (a second request with it only as the retry), verified,
// and the ticket's status, read through the gateway, says delivered.
func TestClusterWebhookDelivererKilled(t *testing.T) {
	skipWithoutCluster(t, false) // before the receiver starts
	secret := webhooktest.Secret()
	rcv, err := webhooktest.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	inFlight := make(chan struct{})
	rcv.Script(func(n int, _ webhooktest.Delivery) webhooktest.Answer {
		if n == 1 {
			return webhooktest.Answer{Status: http.StatusNoContent, Wait: func(ctx context.Context) {
				close(inFlight)
				<-ctx.Done() // held open until the sender dies
			}}
		}
		return webhooktest.Answer{Status: http.StatusNoContent}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := startCluster(t, ctx, Options{
		Replicas: 3,
		Env: []string{
			"DAS_ASK_WEBHOOK_ALLOW=" + rcv.URL() + "/hooks/", "DAS_ASK_WEBHOOK_SECRETS=" + secret,
			"DAS_ASK_WEBHOOK_ALLOW_ADDRS=127.0.0.0/8", "DAS_ASK_WEBHOOK_TIMEOUT_S=2",
		},
	})
	cl := clientFor(t, ctx, c, c.GatewayURL, client.Options{})
	conv, err := cl.CreateConversation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := cl.AskWith(ctx, conv.Id, "How many sev1 incidents did we have in 2026-Q2?", client.AskOptions{Webhook: rcv.URL() + "/hooks/a"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-inFlight:
	case <-ctx.Done():
		t.Fatal("no delivery attempt")
	}
	holder, err := c.WebhookHolder(ctx, tk.Ticket)
	if err != nil || holder == "" {
		t.Fatalf("the delivery's holder in Redis: %q, %v", holder, err)
	}
	killed, err := c.Holder(holder)
	if err != nil {
		t.Fatalf("no replica's deliverer is %s: %v", holder, err)
	}
	c.Kill(killed)
	killedAt := time.Now()

	var st gen.AskStatus
	if err := waitFor(ctx, func() bool {
		if st, err = cl.Status(ctx, tk.Ticket, 0); err != nil {
			t.Fatal(err)
		}
		return st.Webhook != nil && st.Webhook.State != gen.WebhookStatePending
	}); err != nil {
		t.Fatalf("still pending: %+v", st.Webhook)
	}
	// One attempt counted: the killed replica's recorded nothing; one survivor's delivered.
	if st.Webhook.State != gen.WebhookStateDelivered || st.Webhook.Attempts != 1 {
		t.Fatalf("delivery %+v, want delivered by a survivor in the one attempt recorded", *st.Webhook)
	}
	got := rcv.Deliveries()
	if len(got) != 2 {
		t.Fatalf("receiver got %d requests, want exactly the killed replica's and one survivor's", len(got))
	}
	for i, d := range got {
		if d.ID != st.Webhook.Id || !d.Verified || string(d.Body) != string(got[0].Body) {
			t.Errorf("request %d: id %q (want %q), verified %v (%s)", i+1, d.ID, st.Webhook.Id, d.Verified, d.VerifyError)
		}
	}
	t.Logf("killed replica %d holding %s; delivered by a survivor %v later, %d requests, one id", killed+1, holder, time.Since(killedAt).Round(time.Millisecond), len(got))
}
