package main

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/webhook"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// TestRunWebhook: -webhook (and $ASK_WEBHOOK) names the ask's webhook; the receiver gets the
// signed end. A webhook the service does not allow is a usage failure before any ticket.
func TestRunWebhook(t *testing.T) {
	secret := webhooktest.Secret()
	rcv, err := webhooktest.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	f := startWith(t, server.Options{Webhooks: server.WebhookOptions{Config: webhook.Config{
		Allow: []string{rcv.URL() + "/in/"}, Secrets: []string{secret},
		AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Poll: 10 * time.Millisecond,
	}}})
	arrived := rcv.Arrived()
	code, _, stderr := f.run(t.Context(), f.env(t), "-webhook", rcv.URL()+"/in/cli", "answer")
	if code != exitAnswer {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10s")
	}
	if d := rcv.Deliveries(); len(d) != 1 || !d[0].Verified || !strings.HasPrefix(d[0].Path, "/in/cli") {
		t.Fatalf("deliveries %+v", d)
	}

	code, _, stderr = f.run(t.Context(), f.env(t, "ASK_WEBHOOK", "https://elsewhere.example/in/x"), "answer")
	if code != exitFailure || !strings.Contains(stderr, "webhook") {
		t.Fatalf("disallowed webhook: exit %d, stderr %q; want %d naming the webhook", code, stderr, exitFailure)
	}
}
