package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// WebhookConfig lets the suite check webhook delivery: the target POSTs to Receiver, which
// verifies with Secrets. The checks that need deliveries run only when the target's allow-list
// (DAS_ASK_WEBHOOK_ALLOW) admits the receiver's URL and the suite holds the target's signing
// secret; otherwise they are skipped, saying which.
type WebhookConfig struct {
	// Receiver is the suite's receiver (NewWebhookReceiver); nil skips the delivery checks.
	Receiver *WebhookReceiver
	// Secrets are the target's signing secrets (whsec_…), to verify signatures with.
	Secrets []string
}

// WebhookReceiver is a verifying receiver the suite's webhook checks deliver to; one may serve
// several runs of the suite. Close it when done.
type WebhookReceiver struct {
	rcv  *webhooktest.Receiver
	base string

	mu     sync.Mutex
	routes map[string]func(n int) webhooktest.Answer
	counts map[string]int
}

// NewWebhookReceiver serves on l, verifying with secrets. url is the receiver's root as the
// target reaches it; "" means http://<l's address>.
func NewWebhookReceiver(l net.Listener, url string, secrets ...string) (*WebhookReceiver, error) {
	rcv, err := webhooktest.NewOn(l, secrets...)
	if err != nil {
		return nil, err
	}
	h := &WebhookReceiver{rcv: rcv, base: strings.TrimSuffix(url, "/"),
		routes: map[string]func(int) webhooktest.Answer{}, counts: map[string]int{}}
	if h.base == "" {
		h.base = rcv.URL()
	}
	rcv.Script(func(_ int, d webhooktest.Delivery) webhooktest.Answer {
		h.mu.Lock()
		defer h.mu.Unlock()
		path := pathOnly(d.Path)
		h.counts[path]++
		if f := h.routes[path]; f != nil {
			return f(h.counts[path])
		}
		return webhooktest.Answer{Status: http.StatusNoContent}
	})
	return h, nil
}

// URL is the receiver's root as the target reaches it.
func (h *WebhookReceiver) URL() string { return h.base }

// Close stops the receiver.
func (h *WebhookReceiver) Close() { h.rcv.Close() }

func pathOnly(p string) string {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		return p[:i]
	}
	return p
}

// receiver is the configured receiver, or why the delivery checks cannot run.
func (s *session) receiver() (*WebhookReceiver, string) {
	switch {
	case s.cfg.Webhooks.Receiver == nil:
		return nil, "no webhook receiver was configured (--webhook-secret starts one)"
	case len(s.cfg.Webhooks.Secrets) == 0:
		return nil, "no signing secret of the target's was given (--webhook-secret), so deliveries cannot be verified"
	}
	return s.cfg.Webhooks.Receiver, ""
}

// route reserves a fresh path on the receiver, answered by f (nil: 204), and returns its URL.
func (h *WebhookReceiver) route(name string, f func(n int) webhooktest.Answer) (path, url string) {
	path = "/ask-conformance/" + name + "/" + strings.ToLower(rand.Text()[:10])
	h.mu.Lock()
	h.routes[path] = f
	h.mu.Unlock()
	return path, h.base + path
}

// at returns the deliveries to path so far.
func (h *WebhookReceiver) at(path string) []webhooktest.Delivery {
	var out []webhooktest.Delivery
	for _, d := range h.rcv.Deliveries() {
		if pathOnly(d.Path) == path {
			out = append(out, d)
		}
	}
	return out
}

// hookedRun is one ask made with a webhook, followed to its end.
type hookedRun struct {
	path, url string
	rcv       *WebhookReceiver
	ticket    string
	frames    []sseFrameLite
	skip      string // why the target did not take the webhook
}

type sseFrameLite struct {
	event string
	data  []byte
}

// askHooked asks the answer question as A with a webhook at a fresh path answered by f. A 400
// naming the webhook means the target does not admit the receiver: hookedRun.skip says so.
func (s *session) askHooked(ctx context.Context, name string, f func(int) webhooktest.Answer) (*hookedRun, error) {
	h, why := s.receiver()
	if h == nil {
		return &hookedRun{skip: why}, nil
	}
	hr := &hookedRun{rcv: h}
	hr.path, hr.url = h.route(name, f)
	conv, err := s.conversation(ctx, A)
	if err != nil {
		return nil, err
	}
	tok, err := s.token(ctx, A)
	if err != nil {
		return nil, err
	}
	resp, err := s.api.CreateAskWithResponse(ctx, conv, nil, gen.AskRequest{Question: s.cfg.Questions.Answer, Webhook: &gen.WebhookRequest{Url: hr.url}}, bearer(tok))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode() == http.StatusBadRequest {
		hr.skip = "the target does not admit the suite's receiver " + h.base + "/ (add it to DAS_ASK_WEBHOOK_ALLOW, or give --webhook-url an address it admits)"
		return hr, nil
	}
	if resp.JSON202 == nil {
		return nil, fmt.Errorf("ask with a webhook: status %d, want 202", resp.StatusCode())
	}
	hr.ticket = resp.JSON202.Ticket
	for _, e := range s.stream(ctx, A, hr.ticket, cursor{}, nil).Events {
		hr.frames = append(hr.frames, sseFrameLite{event: e.Type, data: e.Raw})
	}
	return hr, nil
}

// webhookEnd asks with a webhook (askHooked) and waits for its delivery to end (waitWebhook).
// When the run could not be made, or the target does not take the suite's receiver, stop is
// the verdict the check returns instead.
func (s *session) webhookEnd(ctx context.Context, name string, f func(int) webhooktest.Answer) (hr *hookedRun, st *gen.WebhookStatus, stop *verdict) {
	hr, err := s.askHooked(ctx, name, f)
	var v verdict
	switch {
	case err != nil:
		v = broken(err)
	case hr.skip != "":
		v = skip("%s", hr.skip)
	default:
		if st, err = s.waitWebhook(ctx, hr.ticket); err == nil {
			return hr, st, nil
		}
		v = broken(err)
	}
	return nil, nil, &v
}

// waitWebhook polls the ticket's status until its delivery is no longer pending.
func (s *session) waitWebhook(ctx context.Context, ticket string) (*gen.WebhookStatus, error) {
	deadline := time.Now().Add(s.cfg.RunTimeout + 30*time.Second)
	for {
		st, code, err := s.status(ctx, A, ticket)
		if err != nil {
			return nil, err
		}
		if st == nil {
			return nil, fmt.Errorf("status: %d", code)
		}
		if st.Webhook == nil {
			return nil, fmt.Errorf("the status of a ticket asked with a webhook has no webhook field")
		}
		if st.Webhook.State != gen.WebhookStatePending {
			return st.Webhook, nil
		}
		if time.Now().After(deadline) {
			return st.Webhook, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func checkWebhookDisallowed(ctx context.Context, s *session) verdict {
	conv, err := s.conversation(ctx, A)
	if err != nil {
		return broken(err)
	}
	tok, err := s.token(ctx, A)
	if err != nil {
		return broken(err)
	}
	// A dot segment under a prefix the target admits (the suite's receiver's, when it has one):
	// the receiver, or a proxy before it, would resolve it to a path outside that prefix.
	dots := "https://hooks.example.com/ask-conformance/dots/../../elsewhere"
	if h, _ := s.receiver(); h != nil {
		dots = h.URL() + "/ask-conformance/dots/%2e%2e/elsewhere"
	}
	var found []string
	// Plain http off loopback: https is required whatever the allow-list says.
	plain := "http://hooks.example.com/ask-conformance/plain"
	for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "ftp://example.com/x", plain, "not a url", dots} {
		resp, err := s.api.CreateAskWithResponse(ctx, conv, nil, gen.AskRequest{Question: s.cfg.Questions.Abstention, Webhook: &gen.WebhookRequest{Url: u}}, bearer(tok))
		if err != nil {
			return broken(err)
		}
		if resp.StatusCode() != http.StatusBadRequest || mediaType(resp.HTTPResponse.Header) != "application/problem+json" {
			found = append(found, fmt.Sprintf("webhook %q: %d %s", u, resp.StatusCode(), mediaType(resp.HTTPResponse.Header)))
		}
	}
	if len(found) > 0 {
		return problems("400 problem+json for a webhook no operator may allow", found, "")
	}
	// Nothing was created: the conversation takes an ask at once (a half-made one would be 409).
	if _, err := s.fullRun(ctx, "after refused webhooks", A, conv, s.cfg.Questions.Abstention); err != nil {
		return fail("the conversation to take an ask after webhooks were refused", err.Error())
	}
	return pass("a metadata address, a non-http scheme, plain http off loopback, a non-URL and a dot segment in the path are each a 400 problem+json, and leave nothing behind")
}

func checkWebhookDelivered(ctx context.Context, s *session) verdict {
	hr, st, stop := s.webhookEnd(ctx, "delivered", nil)
	if stop != nil {
		return *stop
	}
	got := hr.rcv.at(hr.path)
	var found []string
	if st.State != gen.WebhookStateDelivered {
		found = append(found, fmt.Sprintf("status says %s after %d attempts", st.State, st.Attempts))
	}
	if len(got) != 1 {
		found = append(found, fmt.Sprintf("the receiver got %d requests for one ticket, answering 204", len(got)))
	}
	if len(got) == 0 {
		return problems("one signed delivery", found, "")
	}
	d := got[0]
	if !d.Verified {
		found = append(found, "the signature did not verify with the given secret(s): "+d.VerifyError)
	}
	if d.ID == "" || d.ID != st.Id {
		found = append(found, fmt.Sprintf("webhook-id %q, status id %q", d.ID, st.Id))
	}
	if d.Authorization != "" {
		found = append(found, "the delivery carried an Authorization header")
	}
	var marks []string
	for _, who := range []Identity{A, B} {
		if tok, err := s.token(ctx, who); err == nil {
			marks = append(marks, bearerMarks(tok)...)
		}
	}
	found = append(found, credentialsIn(d, marks)...)
	q := s.cfg.Questions.Answer
	if strings.Contains(strings.ToLower(decoded(string(d.Body))), strings.ToLower(q)) {
		found = append(found, "the delivery holds the question")
	}
	// Nor a header (the body's terminal may restate the question in part, as on the stream; a
	// header has no such excuse).
	for name, values := range d.Header {
		for _, v := range values {
			v = decoded(v)
			if n, part := carriesPart(q, v); part || strings.Contains(strings.ToLower(v), strings.ToLower(q)) {
				found = append(found, fmt.Sprintf("the delivery's %s header holds %d characters of the question", http.CanonicalHeaderKey(name), n))
			}
		}
	}
	var body struct {
		Type, Ticket   string
		Terminal, Done json.RawMessage
	}
	if err := json.Unmarshal(d.Body, &body); err != nil {
		found = append(found, "the body is not JSON")
	}
	n := len(hr.frames)
	if n < 2 || hr.frames[n-1].event != "done" {
		found = append(found, "the stream did not end with done")
	} else {
		// Byte for byte, as the contract promises ("exactly the JSON the stream carried"), not
		// by value: a receiver may compare, cache or hash the stream's event and the delivery's.
		if !bytes.Equal(body.Terminal, hr.frames[n-2].data) {
			found = append(found, "the body's terminal is not byte for byte the stream's terminal event")
		}
		if !bytes.Equal(body.Done, hr.frames[n-1].data) {
			found = append(found, "the body's done is not byte for byte the stream's done")
		}
	}
	if body.Type != string(gen.WebhookDeliveryTypeAskEnded) || body.Ticket != hr.ticket {
		found = append(found, fmt.Sprintf("body type %q ticket %q", body.Type, body.Ticket))
	}
	return problems("one delivery, signed, of the stream's terminal event and done, without the question or a bearer", found,
		"one verified delivery with the stream's terminal event and done, byte for byte; status delivered under the same webhook-id")
}

func checkWebhookRetried(ctx context.Context, s *session) verdict {
	hr, st, stop := s.webhookEnd(ctx, "retried", func(n int) webhooktest.Answer {
		if n == 1 {
			return webhooktest.Answer{Status: http.StatusServiceUnavailable}
		}
		return webhooktest.Answer{Status: http.StatusNoContent}
	})
	if stop != nil {
		return *stop
	}
	got := hr.rcv.at(hr.path)
	var found []string
	if st.State != gen.WebhookStateDelivered || st.Attempts != 2 {
		found = append(found, fmt.Sprintf("status %s after %d attempts, want delivered after 2", st.State, st.Attempts))
	}
	if len(got) != 2 {
		found = append(found, fmt.Sprintf("the receiver got %d requests", len(got)))
	} else if got[0].ID != got[1].ID || !bytes.Equal(got[0].Body, got[1].Body) || !got[1].Verified {
		found = append(found, "the retry had another webhook-id or body, or did not verify")
	}
	return problems("a 503 retried once under the same webhook-id", found, "a 503 was retried under the same webhook-id and body, then delivered")
}

func checkWebhookNoRedirect(ctx context.Context, s *session) verdict {
	h, why := s.receiver()
	if h == nil {
		return skip("%s", why)
	}
	targetPath, targetURL := h.route("redirect-target", nil)
	hr, st, stop := s.webhookEnd(ctx, "redirect", func(int) webhooktest.Answer {
		return webhooktest.Answer{Status: http.StatusTemporaryRedirect, Header: http.Header{"Location": {targetURL}}}
	})
	if stop != nil {
		return *stop
	}
	var found []string
	if n := len(hr.rcv.at(hr.path)); n != 1 {
		found = append(found, fmt.Sprintf("the redirecting URL got %d requests", n))
	}
	if n := len(hr.rcv.at(targetPath)); n != 0 {
		found = append(found, fmt.Sprintf("the redirect's target got %d requests", n))
	}
	if st.State != gen.WebhookStateFailed {
		found = append(found, fmt.Sprintf("status %s, want failed", st.State))
	}
	return problems("a redirect answered and not followed", found, "a 307 ended delivery as failed; its target got nothing")
}

// credentialsIn says where in d (a header, by name, or the body) a credential rides: one of
// marks (the suite's bearers, bearerMarks), or a Cookie or Proxy-Authorization header, which a delivery never
// needs. The Authorization header is checked on its own.
func credentialsIn(d webhooktest.Delivery, marks []string) []string {
	carries := carrier(marks)
	var found []string
	for name, values := range d.Header {
		name = http.CanonicalHeaderKey(name)
		switch name {
		case "Authorization":
			continue
		case "Cookie", "Proxy-Authorization":
			found = append(found, "the delivery carried a "+name+" header")
			continue
		}
		if slices.ContainsFunc(values, carries) {
			found = append(found, "the delivery's "+name+" header carried a caller's bearer")
		}
	}
	if carries(string(d.Body)) {
		found = append(found, "the delivery's body carried a caller's bearer")
	}
	slices.Sort(found)
	return found
}
