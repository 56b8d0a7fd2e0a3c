package obs_test

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/webhook"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// TestWebhookMetrics: real deliveries (one retried, one refused) count attempts by outcome and
// status class and deliveries by final state, and no label holds the URL, its host or a ticket.
func TestWebhookMetrics(t *testing.T) {
	secret := webhooktest.Secret()
	rcv, err := webhooktest.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	rcv.Script(func(n int, d webhooktest.Delivery) webhooktest.Answer {
		if strings.Contains(d.Path, "/gone") {
			return webhooktest.Answer{Status: 410}
		}
		if n == 1 {
			return webhooktest.Answer{Status: 503}
		}
		return webhooktest.Answer{Status: 204}
	})
	o := obs.New(obs.Options{})
	hooks := endSignal{Observer: o.Webhooks(), ended: make(chan gen.WebhookState, 1)}
	h := newWebhookHarness(t, server.WebhookOptions{Observer: hooks, Config: webhook.Config{
		Allow: []string{rcv.URL() + "/"}, Secrets: []string{secret}, AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		BaseBackoff: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond, Poll: 10 * time.Millisecond,
	}})
	t1 := h.askHook(rcv.URL() + "/ok")
	hooks.wait(t, gen.WebhookStateDelivered)
	t2 := h.askHook(rcv.URL() + "/gone")
	hooks.wait(t, gen.WebhookStateFailed)

	fams := gather(t, o)
	count := func(name string, labels map[string]string) float64 {
		var n float64
		for _, m := range fams[name].GetMetric() {
			match := true
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					match = false
				}
				for _, bad := range []string{rcv.URL(), "127.0.0.1", t1, t2, "/ok", "/gone"} {
					if strings.Contains(l.GetValue(), bad) {
						t.Errorf("%s label %s=%q holds %q", name, l.GetName(), l.GetValue(), bad)
					}
				}
			}
			if match {
				n += m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			}
		}
		return n
	}
	if got := count("ask_webhook_attempts_total", map[string]string{"outcome": "retry", "code": "5xx"}); got != 1 {
		t.Errorf("retried 5xx attempts = %v, want 1", got)
	}
	if got := count("ask_webhook_attempts_total", map[string]string{"outcome": "delivered", "code": "2xx"}); got != 1 {
		t.Errorf("delivered attempts = %v, want 1", got)
	}
	if got := count("ask_webhook_attempts_total", map[string]string{"outcome": "rejected", "code": "4xx"}); got != 1 {
		t.Errorf("rejected attempts = %v, want 1", got)
	}
	if got := count("ask_webhook_deliveries_total", map[string]string{"state": string(gen.WebhookStateDelivered)}); got != 1 {
		t.Errorf("delivered deliveries = %v, want 1", got)
	}
	if got := count("ask_webhook_deliveries_total", map[string]string{"state": string(gen.WebhookStateFailed)}); got != 1 {
		t.Errorf("failed deliveries = %v, want 1", got)
	}
	if got := count("ask_webhook_attempt_duration_seconds", nil); got != 3 {
		t.Errorf("attempt latencies observed = %v, want 3", got)
	}
}

type webhookHarness struct {
	t *testing.T
	c *client.Client
}

type oneUser struct{}

func (oneUser) Authenticate(_ context.Context, tok string) (ask.Identity, error) {
	return ask.Identity{OID: "u", Tenant: "t", Token: tok}, nil
}

func newWebhookHarness(t *testing.T, wo server.WebhookOptions) *webhookHarness {
	t.Helper()
	srv, err := server.New(server.Options{
		Runner: ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome {
			return ask.Outcome{Abstention: &gen.AbstentionBody{Terms: []string{}}}
		}),
		Authenticator: oneUser{}, Webhooks: wo,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		hs.Close()
	})
	c, err := client.New(hs.URL+"/ask", client.Options{Token: client.StaticToken("tok")})
	if err != nil {
		t.Fatal(err)
	}
	return &webhookHarness{t: t, c: c}
}

func (h *webhookHarness) askHook(url string) string {
	h.t.Helper()
	conv, err := h.c.CreateConversation(h.t.Context())
	if err != nil {
		h.t.Fatal(err)
	}
	tk, err := h.c.AskWith(h.t.Context(), conv.Id, "metrics question", client.AskOptions{Webhook: url})
	if err != nil {
		h.t.Fatal(err)
	}
	return tk.Ticket
}

// endSignal is obs's webhook observer, telling the test each delivery's end once obs has
// counted it (the deliverer reports every attempt before the end).
type endSignal struct {
	webhook.Observer
	ended chan gen.WebhookState
}

func (e endSignal) Ended(state gen.WebhookState, attempts int, sinceDone time.Duration) {
	e.Observer.Ended(state, attempts, sinceDone)
	e.ended <- state
}

// wait waits for the next delivery to end, in state want.
func (e endSignal) wait(t *testing.T, want gen.WebhookState) {
	t.Helper()
	select {
	case got := <-e.ended:
		if got != want {
			t.Fatalf("delivery ended %s, want %s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no delivery ended within 10s (want %s)", want)
	}
}

// TestWebhookLastAttemptsRetryOutcome: outcome="retry" is the answer's class (a failure worth
// retrying), as docs/operations.md defines it, so the one attempt of a delivery with
// DAS_ASK_WEBHOOK_MAX_ATTEMPTS=1 that fails counts as retry though nothing retries it, and the
// delivery's giving up counts in ask_webhook_deliveries_total{state="failed"}. The metric's
// HELP, which an operator reads on /metrics, says so: it read "by outcome (delivered, retry,
// rejected)" alone.
func TestWebhookLastAttemptsRetryOutcome(t *testing.T) {
	secret := webhooktest.Secret()
	rcv, err := webhooktest.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	rcv.Script(func(int, webhooktest.Delivery) webhooktest.Answer { return webhooktest.Answer{Status: 503} })
	o := obs.New(obs.Options{})
	hooks := endSignal{Observer: o.Webhooks(), ended: make(chan gen.WebhookState, 1)}
	h := newWebhookHarness(t, server.WebhookOptions{Observer: hooks, Config: webhook.Config{
		Allow: []string{rcv.URL() + "/"}, Secrets: []string{secret}, AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		MaxAttempts: 1, Poll: 10 * time.Millisecond,
	}})
	h.askHook(rcv.URL() + "/down")
	hooks.wait(t, gen.WebhookStateFailed)
	fams := gather(t, o)
	if got := value(fams, "ask_webhook_attempts_total", "outcome", "retry", "code", "5xx"); got != 1 {
		t.Errorf("the one failed attempt counted %v times as retry, want 1", got)
	}
	if got := value(fams, "ask_webhook_deliveries_total", "state", "failed"); got != 1 {
		t.Errorf("failed deliveries %v, want 1", got)
	}
	if help := fams["ask_webhook_attempts_total"].GetHelp(); !strings.Contains(help, "last attempt") || !strings.Contains(help, `ask_webhook_deliveries_total{state="failed"}`) {
		t.Errorf("ask_webhook_attempts_total's HELP %q does not say that a last attempt's failure is retry, nor where a delivery given up counts", help)
	}
}
