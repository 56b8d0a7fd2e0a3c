package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/webhook"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// TestAskWithWebhook: the client names a webhook; the receiver gets the run's end, signed, and
// Status reports it delivered. A webhook the operator does not allow is a 400 with no ticket.
func TestAskWithWebhook(t *testing.T) {
	secret := webhooktest.Secret()
	rcv, err := webhooktest.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	runner := &scripted{gate: make(chan struct{})}
	close(runner.gate)
	srv, err := server.New(server.Options{
		Runner: runner, Authenticator: tokens{"alice-token": "alice"},
		Webhooks: server.WebhookOptions{Config: webhook.Config{
			Allow: []string{rcv.URL() + "/in/"}, Secrets: []string{secret},
			AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Poll: 10 * time.Millisecond,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	c, err := client.New(hs.URL+"/ask", client.Options{Token: client.StaticToken("alice-token")})
	if err != nil {
		t.Fatal(err)
	}
	conv, err := c.CreateConversation(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	_, err = c.AskWith(t.Context(), conv.Id, "how many?", client.AskOptions{Webhook: "https://elsewhere.example/in/x"})
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Fatalf("disallowed webhook: err %v, want a 400 APIError", err)
	}

	tk, err := c.AskWith(t.Context(), conv.Id, "how many?", client.AskOptions{Webhook: rcv.URL() + "/in/x"})
	if err != nil {
		t.Fatal(err)
	}
	arrived := rcv.Arrived()
	if len(rcv.Deliveries()) == 0 {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("no delivery within 10s")
		}
	}
	d := rcv.Deliveries()[0]
	if !d.Verified {
		t.Fatalf("delivery not verified: %s", d.VerifyError)
	}
	for {
		st, err := c.Status(t.Context(), tk.Ticket, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if st.Webhook != nil && st.Webhook.State == gen.WebhookStateDelivered {
			if st.Webhook.Id != d.ID {
				t.Fatalf("status id %q, delivery id %q", st.Webhook.Id, d.ID)
			}
			return
		}
		if st.Webhook == nil {
			t.Fatal("status shows no webhook")
		}
	}
}
