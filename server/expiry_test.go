package server_test

import (
	"context"
	"crypto/rand"
	"net/http"
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
