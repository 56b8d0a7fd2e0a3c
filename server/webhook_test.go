package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/webhook"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// hookConfig admits rcv's URLs, on loopback, with fast retries.
func hookConfig(rcv *webhooktest.Receiver, secrets ...string) webhook.Config {
	return webhook.Config{
		Allow:       []string{rcv.URL() + "/hooks/"},
		Secrets:     secrets,
		AllowAddrs:  []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		BaseBackoff: 5 * time.Millisecond,
		MaxBackoff:  40 * time.Millisecond,
		Poll:        10 * time.Millisecond,
		Timeout:     2 * time.Second,
	}
}

func newReceiver(t *testing.T, secrets ...string) *webhooktest.Receiver {
	t.Helper()
	r, err := webhooktest.New(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func (h *harness) askHook(tok, cid, q, url string) *gen.CreateAskResponse {
	h.t.Helper()
	h.secret(q)
	r, err := h.cw.CreateAskWithResponse(context.Background(), cid, nil, gen.AskRequest{Question: q, Webhook: &gen.WebhookRequest{Url: url}}, bearer(tok))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// waitWebhook polls GET until the ticket's delivery is no longer pending.
func (h *harness) waitWebhook(tok, ticket string) gen.WebhookStatus {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := h.status(tok, ticket, header("Prefer", "wait=5"))
		if r.JSON200 == nil {
			h.t.Fatalf("status: %d %s", r.StatusCode(), r.Body)
		}
		if w := r.JSON200.Webhook; w != nil && w.State != gen.WebhookStatePending {
			return *w
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("webhook still pending: %s", r.Body)
		}
		// Delivery happens on its own goroutine; GET is how a client learns its state.
		select {
		case <-time.After(5 * time.Millisecond):
		case <-h.t.Context().Done():
			h.t.Fatal("test ended")
		}
	}
}

func blockUntilDone() ask.Runner {
	return ask.RunnerFunc(func(ctx context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome {
		<-ctx.Done()
		return ask.Outcome{}
	})
}

func TestWebhookEachTerminalKind(t *testing.T) {
	outcome := func(o ask.Outcome) ask.Runner {
		return ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome { return o })
	}
	cases := []struct {
		name     string
		runner   ask.Runner
		deadline time.Duration
		cancel   bool
		want     gen.EventType
		kind     gen.ErrorKind
	}{
		{name: "answer", runner: answerRunner(2), want: gen.EventTypeAnswer},
		{name: "abstention", runner: outcome(ask.Outcome{Abstention: &gen.AbstentionBody{Terms: []string{"churn"}}}), want: gen.EventTypeAbstention},
		{name: "refusal", runner: outcome(ask.Outcome{Refusal: &gen.RefusalBody{CallId: "c1", Tool: "run_query", Source: "demo", Reason: "policy"}}), want: gen.EventTypeRefusal},
		{name: "error", runner: outcome(ask.Outcome{Error: &gen.ErrorBody{Kind: gen.ErrorKindModel, Message: "model failed"}}), want: gen.EventTypeError, kind: gen.ErrorKindModel},
		{name: "cancel", runner: blockUntilDone(), cancel: true, want: gen.EventTypeError, kind: gen.ErrorKindCancelled},
		{name: "timeout", runner: blockUntilDone(), deadline: 200 * time.Millisecond, want: gen.EventTypeError, kind: gen.ErrorKindTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			secret := webhooktest.Secret()
			rcv := newReceiver(t, secret)
			h := newHarness(t, server.Options{Runner: tc.runner, Deadline: tc.deadline,
				Webhooks: server.WebhookOptions{Config: hookConfig(rcv, secret)}})
			h.secret(secret)
			q := "webhook question " + tc.name + " zq81"
			r := h.askHook(alice, h.conv(alice), q, rcv.URL()+"/hooks/slack?x=1")
			if r.JSON202 == nil {
				t.Fatalf("ask: %d %s", r.StatusCode(), r.Body)
			}
			ticket := r.JSON202.Ticket
			if tc.cancel {
				h.cancel(alice, ticket)
			}
			st := h.waitWebhook(alice, ticket)
			if st.State != gen.WebhookStateDelivered || st.Attempts != 1 || st.LastStatus == nil || *st.LastStatus != http.StatusNoContent {
				t.Fatalf("webhook status = %+v, want delivered after 1 attempt with 204", st)
			}
			got := rcv.Deliveries()
			if len(got) != 1 {
				t.Fatalf("receiver got %d requests, want 1", len(got))
			}
			d := got[0]
			if !d.Verified {
				t.Fatalf("signature did not verify: %s", d.VerifyError)
			}
			if d.ID != st.Id || !strings.HasPrefix(d.Signature, "v1,") {
				t.Errorf("webhook-id %q (status says %q), signature %q", d.ID, st.Id, d.Signature)
			}
			if d.Authorization != "" {
				t.Errorf("a delivery carried Authorization %q", d.Authorization)
			}
			if d.Method != http.MethodPost || d.Path != "/hooks/slack?x=1" {
				t.Errorf("request %s %s", d.Method, d.Path)
			}
			if bytes.Contains(d.Body, []byte(q)) || bytes.Contains(d.Body, []byte(alice)) {
				t.Fatal("the delivery holds the question or the bearer")
			}
			body, err := d.Decode()
			if err != nil {
				t.Fatal(err)
			}
			if body.Type != gen.WebhookDeliveryTypeAskEnded || body.Ticket != ticket {
				t.Errorf("body type %q ticket %q", body.Type, body.Ticket)
			}
			// The terminal event and done are the stream's own bytes.
			frames := h.events(alice, ticket)
			var raw struct{ Terminal, Done json.RawMessage }
			if err := json.Unmarshal(d.Body, &raw); err != nil {
				t.Fatal(err)
			}
			n := len(frames)
			if n < 2 || !bytes.Equal(frames[n-2].Data, raw.Terminal) || !bytes.Equal(frames[n-1].Data, raw.Done) {
				t.Fatalf("delivery's terminal/done differ from the stream's:\n%s\n%s", raw.Terminal, raw.Done)
			}
			if frames[n-2].Event != string(tc.want) {
				t.Fatalf("terminal %s, want %s", frames[n-2].Event, tc.want)
			}
			if tc.kind != "" && !bytes.Contains(raw.Terminal, []byte(`"kind":"`+string(tc.kind)+`"`)) {
				t.Errorf("terminal %s, want kind %s", raw.Terminal, tc.kind)
			}
		})
	}
}

// Every answer but a 2xx, a 410 or a redirect is retried (Standard Webhooks: a failure, a 404
// named among them): a receiver mid-deploy (404), mid-rotation of its secret (401) or with a
// passing bug (400) gets the end once it is back.
func TestWebhookRetriesUntilDelivered(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusRequestTimeout, http.StatusInternalServerError,
		http.StatusNotFound, http.StatusUnauthorized, http.StatusBadRequest} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			secret := webhooktest.Secret()
			rcv := newReceiver(t, secret)
			rcv.Script(webhooktest.FailFirst(3, status, nil))
			h := newHarness(t, server.Options{Webhooks: server.WebhookOptions{Config: hookConfig(rcv, secret)}})
			h.secret(secret)
			ticket := h.askHook(alice, h.conv(alice), "retry me q7", rcv.URL()+"/hooks/a").JSON202.Ticket
			st := h.waitWebhook(alice, ticket)
			if st.State != gen.WebhookStateDelivered || st.Attempts != 4 {
				t.Fatalf("status %+v, want delivered on the 4th attempt", st)
			}
			got := rcv.Deliveries()
			if len(got) != 4 {
				t.Fatalf("receiver got %d requests, want 4", len(got))
			}
			for i, d := range got {
				if d.ID != st.Id || !d.Verified {
					t.Errorf("attempt %d: id %q (want %q), verified %v", i+1, d.ID, st.Id, d.Verified)
				}
				if !bytes.Equal(d.Body, got[0].Body) {
					t.Errorf("attempt %d sent another body", i+1)
				}
			}
		})
	}
}

func TestWebhookGivesUp(t *testing.T) {
	cases := []struct {
		name     string
		script   func(int, webhooktest.Delivery) webhooktest.Answer
		attempts int
		status   int
	}{
		{"410 ends it", webhooktest.FailFirst(100, http.StatusGone, nil), 1, 410},
		{"attempts run out", webhooktest.FailFirst(100, http.StatusBadGateway, nil), 3, 502},
		{"attempts run out on a 4xx", webhooktest.FailFirst(100, http.StatusForbidden, nil), 3, 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			secret := webhooktest.Secret()
			rcv := newReceiver(t, secret)
			rcv.Script(tc.script)
			cfg := hookConfig(rcv, secret)
			cfg.MaxAttempts = 3
			h := newHarness(t, server.Options{Webhooks: server.WebhookOptions{Config: cfg}})
			ticket := h.askHook(alice, h.conv(alice), "give up q", rcv.URL()+"/hooks/a").JSON202.Ticket
			st := h.waitWebhook(alice, ticket)
			if st.State != gen.WebhookStateFailed || st.Attempts != tc.attempts || st.LastStatus == nil || *st.LastStatus != tc.status {
				t.Fatalf("status %+v, want failed after %d attempts, last %d", st, tc.attempts, tc.status)
			}
			if n := len(rcv.Deliveries()); n != tc.attempts {
				t.Fatalf("receiver got %d requests, want %d", n, tc.attempts)
			}
		})
	}
}

func TestWebhookRotation(t *testing.T) {
	old, next := webhooktest.Secret(), webhooktest.Secret()
	for _, tc := range []struct {
		name     string
		rcv      []string
		verified bool
	}{
		{"receiver still on the old secret", []string{old}, true},
		{"receiver moved to the new secret", []string{next}, true},
		{"receiver holding both", []string{next, old}, true},
		{"receiver with another secret", []string{webhooktest.Secret()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rcv := newReceiver(t, tc.rcv...)
			h := newHarness(t, server.Options{Webhooks: server.WebhookOptions{Config: hookConfig(rcv, next, old)}})
			ticket := h.askHook(alice, h.conv(alice), "rotate q", rcv.URL()+"/hooks/a").JSON202.Ticket
			h.waitWebhook(alice, ticket)
			d := rcv.Deliveries()[0]
			if d.Verified != tc.verified {
				t.Fatalf("verified = %v (%s), want %v", d.Verified, d.VerifyError, tc.verified)
			}
			if n := len(strings.Fields(d.Signature)); n != 2 {
				t.Errorf("signature header holds %d signatures, want 2 (one per secret): %q", n, d.Signature)
			}
		})
	}
}

func TestWebhookRedirectNotFollowed(t *testing.T) {
	secret := webhooktest.Secret()
	target := newReceiver(t, secret)
	rcv := newReceiver(t, secret)
	rcv.Script(func(int, webhooktest.Delivery) webhooktest.Answer {
		return webhooktest.Answer{Status: http.StatusTemporaryRedirect, Header: http.Header{"Location": {target.URL() + "/hooks/a"}}}
	})
	cfg := hookConfig(rcv, secret)
	cfg.Allow = append(cfg.Allow, target.URL()+"/hooks/")
	h := newHarness(t, server.Options{Webhooks: server.WebhookOptions{Config: cfg}})
	ticket := h.askHook(alice, h.conv(alice), "redirect q", rcv.URL()+"/hooks/a").JSON202.Ticket
	st := h.waitWebhook(alice, ticket)
	if st.State != gen.WebhookStateFailed || st.Attempts != 1 || st.LastError == nil || *st.LastError != "redirect" {
		t.Fatalf("status %+v, want failed with redirect after one attempt", st)
	}
	if n := len(rcv.Deliveries()); n != 1 {
		t.Errorf("redirecting receiver got %d requests, want 1", n)
	}
	if n := len(target.Deliveries()); n != 0 {
		t.Errorf("redirect target got %d requests, want 0", n)
	}
}

func TestWebhookPrivateAddressRefusedAtConnect(t *testing.T) {
	secret := webhooktest.Secret()
	rcv := newReceiver(t, secret)
	cfg := hookConfig(rcv, secret)
	cfg.AllowAddrs = nil // loopback is allowed by the prefix, but not as an address
	port := rcv.URL()[strings.LastIndex(rcv.URL(), ":"):]
	cfg.Allow = []string{"http://localhost" + port + "/hooks/"}
	h := newHarness(t, server.Options{Webhooks: server.WebhookOptions{Config: cfg}})
	ticket := h.askHook(alice, h.conv(alice), "private q", "http://localhost"+port+"/hooks/a").JSON202.Ticket
	st := h.waitWebhook(alice, ticket)
	if st.State != gen.WebhookStateFailed || st.LastError == nil || *st.LastError != "refused_address" {
		t.Fatalf("status %+v, want failed with refused_address", st)
	}
	if n := len(rcv.Deliveries()); n != 0 {
		t.Fatalf("receiver on a refused address got %d requests", n)
	}
}

func TestWebhookNotAllowedIs400BeforeATicket(t *testing.T) {
	secret := webhooktest.Secret()
	rcv := newReceiver(t, secret)
	h := newHarness(t, server.Options{Webhooks: server.WebhookOptions{Config: hookConfig(rcv, secret)}})
	off := newHarness(t, server.Options{})
	port := rcv.URL()[strings.LastIndex(rcv.URL(), ":"):]
	for _, tc := range []struct {
		name string
		h    *harness
		url  string
	}{
		{"outside the allow-list", h, rcv.URL() + "/other/a"},
		{"prefix host is not a host prefix", h, "http://127.0.0.1" + port + "0/hooks/a"},
		{"plain http off loopback", h, "http://hooks.example.com/hooks/a"},
		{"user info", h, strings.Replace(rcv.URL(), "://", "://u:p@", 1) + "/hooks/a"},
		{"fragment", h, rcv.URL() + "/hooks/a#x"},
		{"dot segments out of the prefix", h, rcv.URL() + "/hooks/../other/a"},
		{"encoded dot segments out of the prefix", h, rcv.URL() + "/hooks/%2e%2e/other/a"},
		{"a pasted trailing space", h, rcv.URL() + "/hooks/a "},
		{"a broken escape in the query", h, rcv.URL() + "/hooks/a?q=50%"},
		{"relative", h, "/hooks/a"},
		{"not a URL", h, "::::"},
		{"metadata address", h, "http://169.254.169.254/latest/meta-data/"},
		{"webhooks off", off, rcv.URL() + "/hooks/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cid := tc.h.conv(alice)
			r := tc.h.askHook(alice, cid, "refused q", tc.url)
			p := problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusBadRequest)
			if !strings.Contains(strings.ToLower(*p.Detail), "webhook") {
				t.Errorf("detail %q does not say what was wrong", *p.Detail)
			}
			// The reason is said once: clients print the detail and then the violations (the
			// CLI: "… not allowed: R (webhook.url: R)" said R twice).
			if p.Errors == nil || len(*p.Errors) == 0 {
				t.Errorf("no violation says why the webhook is refused: %s", r.Body)
			}
			for _, e := range deref(p.Errors) {
				if reason := strings.TrimPrefix(e, "webhook.url: "); strings.Contains(*p.Detail, reason) {
					t.Errorf("detail %q repeats the violation %q", *p.Detail, e)
				}
			}
			if strings.Contains(string(r.Body), tc.url) && tc.url != "/hooks/a" {
				t.Errorf("the problem echoes the URL: %s", r.Body)
			}
			// Nothing was created: the conversation takes an ask at once (no 409), and it is
			// the conversation's first.
			tc.h.ask(alice, cid, "after the refusal")
		})
	}
	if n := len(rcv.Deliveries()); n != 0 {
		t.Fatalf("a refused webhook got %d deliveries", n)
	}
}

func TestWebhookNotNamedShowsNoDelivery(t *testing.T) {
	secret := webhooktest.Secret()
	rcv := newReceiver(t, secret)
	h := newHarness(t, server.Options{Webhooks: server.WebhookOptions{Config: hookConfig(rcv, secret)}})
	ticket := h.ask(alice, h.conv(alice), "no hook")
	r := h.status(alice, ticket, header("Prefer", "wait=5"))
	if r.JSON200 == nil || r.JSON200.State == gen.AskStateRunning || r.JSON200.Webhook != nil {
		t.Fatalf("status %s, want finished with no webhook", r.Body)
	}
}

// TestWebhookReplicaKilledMidDelivery: replica A claims the delivery and dies while its POST is
// at the receiver, before recording anything; replica B, over the same Redis, takes the claim
// once it lapses and delivers under the same webhook-id. The receiver sees one delivery id, a
// second time only as a retry, and the ticket's status says delivered.
func TestWebhookReplicaKilledMidDelivery(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "wh:" + rand.Text() + ":"
	secret := webhooktest.Secret()
	rcv := newReceiver(t, secret)
	inFlight := make(chan struct{})
	rcv.Script(func(n int, _ webhooktest.Delivery) webhooktest.Answer {
		if n == 1 {
			return webhooktest.Answer{Status: http.StatusNoContent, Wait: func(ctx context.Context) {
				close(inFlight)
				<-ctx.Done() // A is killed with the request open
			}}
		}
		return webhooktest.Answer{Status: http.StatusNoContent}
	})
	cfg := hookConfig(rcv, secret)
	cfg.Timeout = time.Second
	a := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, 0), Webhooks: server.WebhookOptions{Config: cfg}})
	ticket := a.askHook(alice, a.conv(alice), "replica q", rcv.URL()+"/hooks/a").JSON202.Ticket
	select {
	case <-inFlight:
	case <-time.After(10 * time.Second):
		t.Fatal("A made no attempt")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no grace: A stops at once, its attempt cut off
	_ = a.srv.Shutdown(ctx)

	b := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, 0), Webhooks: server.WebhookOptions{Config: cfg}})
	st := b.waitWebhook(alice, ticket)
	// One attempt counted: A's, cut off, recorded nothing; B's delivered.
	if st.State != gen.WebhookStateDelivered || st.Attempts != 1 {
		t.Fatalf("status %+v, want delivered by B in the one attempt recorded", st)
	}
	got := rcv.Deliveries()
	if len(got) != 2 {
		t.Fatalf("receiver got %d requests, want exactly A's cut-off one and B's", len(got))
	}
	for i, d := range got {
		if d.ID != st.Id || !d.Verified || !bytes.Equal(d.Body, got[0].Body) {
			t.Errorf("request %d: id %q (want %q), verified %v, same body %v", i+1, d.ID, st.Id, d.Verified, bytes.Equal(d.Body, got[0].Body))
		}
	}
}

// TestWebhookDeliveredAtShutdown: a graceful shutdown makes an attempt of every delivery its
// runs' ends made due before it returns: the ask that finished during the grace, and the one it
// ended with error{shutdown}. With the in-process store nothing is left to deliver them after
// the process, and a client without the stream learns its ask's end only from the webhook.
func TestWebhookDeliveredAtShutdown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
		want  string
	}{
		{"ended during the grace", time.Minute, `"type":"answer"`},
		{"ended by the shutdown", -1, `"kind":"shutdown"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret := webhooktest.Secret()
			rcv := newReceiver(t, secret)
			finish := make(chan struct{})
			running := make(chan struct{})
			runner := ask.RunnerFunc(func(ctx context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome {
				close(running)
				select {
				case <-finish:
					return ask.Outcome{Answer: &gen.AnswerBody{Text: "done at last"}}
				case <-ctx.Done():
					return ask.Outcome{}
				}
			})
			cfg := hookConfig(rcv, secret)
			cfg.Poll = time.Hour // only the run's end wakes the deliverer
			h := newHarness(t, server.Options{Runner: runner, ShutdownGrace: tc.grace, Webhooks: server.WebhookOptions{Config: cfg}})
			r := h.askHook(alice, h.conv(alice), "shutdown q", rcv.URL()+"/hooks/a")
			if r.JSON202 == nil {
				t.Fatalf("ask: %d %s", r.StatusCode(), r.Body)
			}
			<-running
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			stopped := make(chan error, 1)
			go func() { stopped <- h.srv.Shutdown(ctx) }()
			if tc.grace > 0 {
				close(finish)
			}
			if err := <-stopped; err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			got := rcv.Deliveries()
			if len(got) != 1 {
				t.Fatalf("receiver got %d deliveries by the time Shutdown returned, want 1", len(got))
			}
			if !got[0].Verified || !bytes.Contains(got[0].Body, []byte(tc.want)) {
				t.Fatalf("delivery verified %v, body %s; want %s", got[0].Verified, got[0].Body, tc.want)
			}
		})
	}
}

// TestWebhookNoRetryTimeWhileRunning: while the run still runs no attempt is scheduled, so the
// status has no next_attempt_at (the delivery's safety-net due time is not a retry's).
func TestWebhookNoRetryTimeWhileRunning(t *testing.T) {
	secret := webhooktest.Secret()
	rcv := newReceiver(t, secret)
	h := newHarness(t, server.Options{Runner: blockUntilDone(), ShutdownGrace: -1, Webhooks: server.WebhookOptions{Config: hookConfig(rcv, secret)}})
	ticket := h.askHook(alice, h.conv(alice), "still running q", rcv.URL()+"/hooks/a").JSON202.Ticket
	r := h.status(alice, ticket)
	if r.JSON200 == nil || r.JSON200.Webhook == nil {
		t.Fatalf("status: %d %s", r.StatusCode(), r.Body)
	}
	if w := r.JSON200.Webhook; w.State != gen.WebhookStatePending || w.Attempts != 0 || w.NextAttemptAt != nil {
		t.Fatalf("while running: %s, want pending, no attempt, no next_attempt_at", r.Body)
	}
}

func deref[T any](p *[]T) []T {
	if p == nil {
		return nil
	}
	return *p
}

// TestShutdownCutInAWebhookAttempt: a shutdown whose bound runs out while it attempts a due
// delivery (a receiver that takes the request and never answers), every run having returned,
// says so (ErrWebhooksLeft), not ErrRunnersLeft: askd told the operator "a run still waiting on a
// source or the model had not returned", and the source and the model were not what it waited on.
func TestShutdownCutInAWebhookAttempt(t *testing.T) {
	release := make(chan struct{})
	deaf := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer deaf.Close()
	defer close(release)
	cfg := webhook.Config{
		Allow:      []string{deaf.URL + "/hooks/"},
		Secrets:    []string{webhooktest.Secret()},
		AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Poll:       time.Hour,
		Timeout:    time.Minute,
	}
	running := make(chan struct{})
	runner := ask.RunnerFunc(func(ctx context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome {
		close(running)
		<-ctx.Done()
		return ask.Outcome{}
	})
	h := newHarness(t, server.Options{Runner: runner, ShutdownGrace: -1, Webhooks: server.WebhookOptions{Config: cfg}})
	if r := h.askHook(alice, h.conv(alice), "deaf receiver q", deaf.URL+"/hooks/a"); r.JSON202 == nil {
		t.Fatalf("ask: %d %s", r.StatusCode(), r.Body)
	}
	<-running
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := h.srv.Shutdown(ctx)
	if !errors.Is(err, server.ErrWebhooksLeft) || errors.Is(err, server.ErrRunnersLeft) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want ErrWebhooksLeft (not ErrRunnersLeft) and the deadline", err)
	}
}
