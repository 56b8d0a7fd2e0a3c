package server_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestExpiryAnswers404 holds the contract's lifetimes on both stores: a ticket DAS_ASK_TTL_S
// after its run ended answers 404 on every call (status, events, cancel) with the body of an
// id that never existed, not 410; a conversation idle for the TTL since its creation or its
// last ask's end is gone the same way; and a conversation in which an ask ran past the TTL of
// its creation is kept, its TTL counted from that ask's end.
func TestExpiryAnswers404(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const ttl = time.Minute
			expiryScenario(t, server.Options{TTL: ttl}, func(h *harness, ticket string) {
				time.Sleep(ttl + time.Second)
			})
		})
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		const ttl = time.Second
		st := replicaStoreWith(t, srv, redisstore.Options{Prefix: "expiry:" + rand.Text() + ":", TTL: ttl})
		expiryScenario(t, server.Options{TTL: ttl, Store: st}, func(h *harness, ticket string) {
			redistest.Poll(t, "the finished ticket's expiry", func() bool {
				return h.status(alice, ticket).StatusCode() == http.StatusNotFound
			})
		})
	})
}

// expiryScenario runs the lifetimes' checks on a service built with opts; expire returns once
// the finished ticket it is given has passed its TTL.
func expiryScenario(t *testing.T, opts server.Options, expire func(h *harness, ticket string)) {
	release := make(chan struct{})
	opts.Runner = ask.RunnerFunc(func(ctx context.Context, req ask.Request, _ ask.Emitter) ask.Outcome {
		if req.Question == "held past the TTL" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return ask.Outcome{Answer: answer("42")}
	})
	h := newHarness(t, opts)
	held, idle := h.conv(alice), h.conv(alice)
	heldTicket := h.ask(alice, held, "held past the TTL")
	done := h.ask(alice, idle, "answered at once")
	if r := h.status(alice, done, header("Prefer", "wait=10")); r.StatusCode() != http.StatusOK || r.JSON200.Done == nil {
		t.Fatalf("the quick ask did not end: %d %s", r.StatusCode(), r.Body)
	}
	expire(h, done)

	never := h.status(alice, "t_NEVER0000000000000000000000")
	if never.StatusCode() != http.StatusNotFound {
		t.Fatalf("a ticket that never existed: %d", never.StatusCode())
	}
	resp := h.stream(context.Background(), alice, done, nil)
	events := readBody(t, resp)
	for what, got := range map[string]struct {
		status int
		body   []byte
	}{
		"status": {h.status(alice, done).StatusCode(), h.status(alice, done).Body},
		"events": {resp.StatusCode, events},
		"cancel": {h.cancel(alice, done).StatusCode(), h.cancel(alice, done).Body},
	} {
		if got.status != http.StatusNotFound || string(got.body) != string(never.Body) {
			t.Errorf("%s of a ticket past its TTL: %d %s; want the 404 of one that never existed: %s", what, got.status, got.body, never.Body)
		}
	}
	if r := h.askRaw(alice, idle, "in a conversation idle past its TTL"); r.StatusCode() != http.StatusNotFound || string(r.Body) != string(never.Body) {
		t.Errorf("an ask in a conversation idle past its TTL: %d %s, want 404", r.StatusCode(), r.Body)
	}
	// The held ask ran past its conversation's TTL as counted from its creation: the
	// conversation was kept while it ran, and its TTL starts again at the ask's end.
	close(release)
	if r := h.status(alice, heldTicket, header("Prefer", "wait=10")); r.StatusCode() != http.StatusOK || r.JSON200.Done == nil {
		t.Fatalf("the held ask did not end: %d %s", r.StatusCode(), r.Body)
	}
	if r := h.status(alice, h.ask(alice, held, "after the held ask"), header("Prefer", "wait=10")); r.StatusCode() != http.StatusOK {
		t.Errorf("the next ask's status: %d %s", r.StatusCode(), r.Body)
	}
}

// TestIdempotencyKeyLifetime holds the contract's Idempotency-Key lifetime on both stores:
// within DAS_ASK_TTL_S of its first use, the same request gets the first response again
// (Idempotent-Replayed) and another request under the key is a 422; after it, the key is
// free and the same request is processed afresh.
func TestIdempotencyKeyLifetime(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const ttl = time.Minute
			keyScenario(t, server.Options{TTL: ttl}, func(*harness, string) { time.Sleep(ttl + time.Second) })
		})
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		const ttl = time.Second
		st := replicaStoreWith(t, srv, redisstore.Options{Prefix: "keys:" + rand.Text() + ":", TTL: ttl})
		keyScenario(t, server.Options{TTL: ttl, Store: st}, func(h *harness, ticket string) {
			redistest.Poll(t, "the later ticket's expiry", func() bool {
				return h.status(alice, ticket).StatusCode() == http.StatusNotFound
			})
		})
	})
}

// keyScenario runs the key's checks; expire returns once the ticket it is given, which ended
// after the key's first use, has passed its TTL (so the key has too).
func keyScenario(t *testing.T, opts server.Options, expire func(h *harness, ticket string)) {
	h := newHarness(t, opts)
	post := func(body string) (*http.Response, string) {
		req := newReq(t, http.MethodPost, "/ask/v1/conversations", alice, body)
		req.Header.Set("Idempotency-Key", "conv-key")
		resp := h.do(req)
		return resp, string(readBody(t, resp))
	}
	first, firstBody := post("{}")
	if first.StatusCode != http.StatusCreated {
		t.Fatalf("first use: %d %s", first.StatusCode, firstBody)
	}
	if again, body := post("{}"); again.StatusCode != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" || body != firstBody {
		t.Errorf("the same request within the TTL: %d replayed %q %s, want the first response replayed", again.StatusCode, again.Header.Get("Idempotent-Replayed"), body)
	}
	if again, body := post(""); again.StatusCode != http.StatusCreated || body != firstBody {
		t.Errorf("the same request without its optional body within the TTL: %d %s, want the first response replayed", again.StatusCode, body)
	}
	// Every valid create of a conversation is the same request; an ask is another.
	req := newReq(t, http.MethodPost, "/ask/v1/conversations/"+h.conv(alice)+"/asks", alice, `{"question":"under the conversation's key"}`)
	req.Header.Set("Idempotency-Key", "conv-key")
	if other := h.do(req); other.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("another request under the key within the TTL: %d %s, want 422", other.StatusCode, readBody(t, other))
	}
	later := h.ask(alice, h.conv(alice), "a clock: it ends after the key's first use")
	if r := h.status(alice, later, header("Prefer", "wait=10")); r.StatusCode() != http.StatusOK || r.JSON200.Done == nil {
		t.Fatalf("the later ask did not end: %d %s", r.StatusCode(), r.Body)
	}
	expire(h, later)
	fresh, body := post("{}")
	if fresh.StatusCode != http.StatusCreated || fresh.Header.Get("Idempotent-Replayed") != "" || body == firstBody {
		t.Errorf("the same request after the TTL: %d replayed %q %s, want a new conversation", fresh.StatusCode, fresh.Header.Get("Idempotent-Replayed"), body)
	}
}

// TestTTLShorterThanTheDeadlineIsWarned: a TTL below the deadline is allowed, but an
// Idempotency-Key is kept TTL from its first use, so a retry after it, while the ask it made
// still runs, asks again: the service says so when it starts, and only then.
func TestTTLShorterThanTheDeadlineIsWarned(t *testing.T) {
	const warning = "DAS_ASK_TTL_S is shorter than DAS_ASK_DEADLINE_S"
	for _, tc := range []struct {
		ttl, deadline time.Duration
		warned        bool
	}{
		{time.Second, 2 * time.Second, true},
		{2 * time.Second, 2 * time.Second, false},
		{0, 0, false}, // the defaults: 900 s and 120 s
	} {
		h := newHarness(t, server.Options{TTL: tc.ttl, Deadline: tc.deadline})
		if got := strings.Contains(h.logs.String(), warning); got != tc.warned {
			t.Errorf("TTL %v, deadline %v: warned %v, want %v; the log:\n%s", tc.ttl, tc.deadline, got, tc.warned, h.logs.String())
		}
	}
}
