//go:build !fuzzsmoke

package server_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// leftoverAuth accepts "tok-left-<oid>" as <oid> of one tenant, so each scenario below has an
// identity of its own (the caps are per identity).
type leftoverAuth struct{}

func (leftoverAuth) Authenticate(_ context.Context, tok string) (ask.Identity, error) {
	if oid, ok := strings.CutPrefix(tok, "tok-left-"); ok && oid != "" {
		return ask.Identity{OID: oid, Tenant: "tenant-1", Token: tok}, nil
	}
	return ask.Identity{}, errors.New("unknown token")
}

// leftoverRunner answers, runs until its context ends ("block" in the question), or opens and
// closes a source branch before answering (phase 2's shape: "branch" in the question).
func leftoverRunner() ask.Runner {
	return ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		emit.Step(step(0))
		switch {
		case strings.Contains(req.Question, "block"):
			<-ctx.Done()
			return ask.Outcome{}
		case strings.Contains(req.Question, "branch"):
			b1 := "b1"
			emit.Branch(gen.BranchBody{BranchId: "b2", Parent: &b1, Role: "source", State: gen.BranchBodyStateOpen})
			emit.Step(step(1))
			emit.Branch(gen.BranchBody{BranchId: "b2", Parent: &b1, Role: "source", State: gen.BranchBodyStateClose})
		}
		return ask.Outcome{Answer: answer("42")}
	})
}

// permanentKeys are the keys the Redis store documents as kept without an expiry (store/redis
// doc.go): the store's generation, and each bucket's store-wide sets, whose expired entries
// the lease sweep drops (a set with no entry left is no key at all). Any other key without an
// expiry is a leak.
var permanentKeys = []string{"generation", "convs", "tickets", "running", "wh:due"}

// keyspace is every key under prefix's buckets, with its PTTL (-1: none).
func keyspace(t *testing.T, rdb *goredis.Client, prefix string) map[string]time.Duration {
	t.Helper()
	out := map[string]time.Duration{}
	it := rdb.Scan(t.Context(), 0, "{"+prefix+"*", 1000).Iterator()
	for it.Next(t.Context()) {
		k := it.Val()
		d, err := rdb.PTTL(t.Context(), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if d == -2 { // expired between the scan and the PTTL
			continue
		}
		out[k] = d
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// keyName is k without its bucket's tag.
func keyName(k string) string {
	if i := strings.IndexByte(k, '}'); i >= 0 {
		return k[i+1:]
	}
	return k
}

// TestRedisLeavesNothingBehind: every kind of ask a service meets — answered, followed up,
// phase 2's branches, cancelled, ended by another replica after its own died, created twice
// under one Idempotency-Key, with a webhook delivered and one given up, and asks and
// conversations refused by the caps (with and without a webhook or a key) — leaves, once its
// TTL has passed, nothing under the store's prefix but the documented long-lived keys; and
// before that, every key it left has an expiry.
// Run on one bucket (the default on one Redis) and on three (as on a cluster, each identity's
// keys in its own bucket).
func TestRedisLeavesNothingBehind(t *testing.T) {
	for _, buckets := range []int{1, 3} {
		t.Run("buckets="+strconv.Itoa(buckets), func(t *testing.T) {
			t.Parallel()
			leavesNothingBehind(t, buckets)
		})
	}
}

func leavesNothingBehind(t *testing.T, buckets int) {
	srv := redistest.Start(t)
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := "left:" + rand.Text() + ":"
	const ttl, lease, deadline = 2 * time.Second, 300 * time.Millisecond, 2 * time.Second

	secret := webhooktest.Secret()
	ok, fail := newReceiver(t, secret), newReceiver(t, secret)
	fail.Script(webhooktest.FailFirst(100, http.StatusGone, nil))
	cfg := hookConfig(ok, secret)
	cfg.Allow = append(cfg.Allow, fail.URL()+"/hooks/")
	// Each replica's observer (package obs, as askd wires it) must also forget every ask it
	// admitted, whoever ended it.
	var observers []*obs.Observer
	opts := func(st *redisstore.Store) server.Options {
		o := obs.New(obs.Options{})
		observers = append(observers, o)
		return server.Options{Store: st, Runner: leftoverRunner(), Authenticator: leftoverAuth{}, TTL: ttl, Deadline: deadline,
			MaxInFlight: 1, MaxConversationsPerID: 3, ShutdownGrace: -1, Webhooks: server.WebhookOptions{Config: cfg}, Hooks: o.Hooks()}
	}
	storeOpts := redisstore.Options{Prefix: prefix, Lease: lease, TTL: ttl, Buckets: buckets}
	a := newHarness(t, opts(replicaStoreWith(t, srv, storeOpts)))
	// dying's renewals are lost, as a dead replica's: its asks' leases lapse and another ends them.
	dying := newHarness(t, func() server.Options {
		o := opts(nil)
		o.Store = silentRenewal{replicaStoreWith(t, srv, storeOpts)}
		return o
	}())
	b := newHarness(t, opts(replicaStoreWith(t, srv, storeOpts)))

	tok := func(oid string) string { return "tok-left-" + oid }
	ended := func(h *harness, who, ticket string, want gen.EventType) {
		t.Helper()
		checkLifecycle(t, h.events(tok(who), ticket), want)
	}

	// Timed out: left running while the rest happens, read at the end.
	timedOut := b.ask(tok("tim"), b.conv(tok("tim")), "block until the deadline q")

	// Answered, then followed up in the same conversation (its turns), and phase 2's branches.
	cid := a.conv(tok("ann"))
	ended(b, "ann", a.ask(tok("ann"), cid, "answered q"), gen.EventTypeAnswer)
	ended(a, "ann", b.ask(tok("ann"), cid, "follow-up branch q"), gen.EventTypeAnswer)

	// Cancelled from the other replica.
	cid = a.conv(tok("cat"))
	ticket := a.ask(tok("cat"), cid, "block cancelled q")
	if r := b.cancel(tok("cat"), ticket); r.StatusCode() != http.StatusAccepted {
		t.Fatalf("cancel: %d", r.StatusCode())
	}
	ended(b, "cat", ticket, gen.EventTypeError)

	// Its replica died mid-run: the lease lapses and B ends it (interrupted).
	cid = dying.conv(tok("dan"))
	ticket = dying.ask(tok("dan"), cid, "block lapsed q")
	frames := b.events(tok("dan"), ticket)
	if term, _ := checkLifecycle(t, frames, gen.EventTypeError); term.Kind != "interrupted" {
		t.Errorf("lapsed ask ended %q, want interrupted", term.Kind)
	}

	// Created twice under one key each: the conversation and the ask.
	for range 2 {
		if r := b.keyedConv(tok("ida"), "conv-key-1"); r.StatusCode() != http.StatusCreated {
			t.Fatalf("keyed conversation: %d %s", r.StatusCode(), r.Body)
		}
	}
	cid = b.keyedConv(tok("ida"), "conv-key-1").JSON201.Id
	var keyed string
	for range 2 {
		r := b.keyedAsk(tok("ida"), cid, "ask-key-1", "keyed q")
		if r.StatusCode() != http.StatusAccepted {
			t.Fatalf("keyed ask: %d %s", r.StatusCode(), r.Body)
		}
		keyed = r.JSON202.Ticket
	}
	ended(a, "ida", keyed, gen.EventTypeAnswer)

	// Webhooks: one delivered, one given up (a 410 ends it).
	cid = b.conv(tok("wes"))
	ticket = b.askHook(tok("wes"), cid, "hooked q", ok.URL()+"/hooks/a").JSON202.Ticket
	if st := b.waitWebhook(tok("wes"), ticket); st.State != gen.WebhookStateDelivered {
		t.Errorf("webhook %+v, want delivered", st)
	}
	ticket = b.askHook(tok("wes"), cid, "hooked q2", fail.URL()+"/hooks/b").JSON202.Ticket
	if st := b.waitWebhook(tok("wes"), ticket); st.State != gen.WebhookStateFailed {
		t.Errorf("webhook %+v, want failed", st)
	}

	// Refused by the caps: a second ask in a running conversation (409), an ask past the
	// in-flight cap (429) with a webhook and with a key, and conversations past the identity's
	// cap (429), keyed or not.
	cid = b.conv(tok("ray"))
	running := b.ask(tok("ray"), cid, "block running q")
	if r := b.askRaw(tok("ray"), cid, "second q"); r.StatusCode() != http.StatusConflict {
		t.Errorf("second ask in a running conversation: %d, want 409", r.StatusCode())
	}
	other := b.conv(tok("ray"))
	if r := b.askHook(tok("ray"), other, "hooked refused q", ok.URL()+"/hooks/c"); r.StatusCode() != http.StatusTooManyRequests {
		t.Errorf("ask past the in-flight cap with a webhook: %d, want 429", r.StatusCode())
	}
	if r := b.keyedAsk(tok("ray"), other, "ask-key-2", "keyed refused q"); r.StatusCode() != http.StatusTooManyRequests {
		t.Errorf("keyed ask past the in-flight cap: %d, want 429", r.StatusCode())
	}
	_ = b.conv(tok("ray"))
	if r, body := b.createConv(tok("ray")); r.StatusCode != http.StatusTooManyRequests {
		t.Errorf("conversation past the cap: %d %s, want 429", r.StatusCode, body)
	}
	if r := b.keyedConv(tok("ray"), "conv-key-2"); r.StatusCode() != http.StatusTooManyRequests {
		t.Errorf("keyed conversation past the cap: %d, want 429", r.StatusCode())
	}
	if r := b.cancel(tok("ray"), running); r.StatusCode() != http.StatusAccepted {
		t.Fatalf("cancel: %d", r.StatusCode())
	}
	ended(b, "ray", running, gen.EventTypeError)

	// Ended by its replica's shutdown (no grace: error{shutdown}).
	stopping := newHarness(t, opts(replicaStoreWith(t, srv, storeOpts)))
	ticket = stopping.ask(tok("sam"), stopping.conv(tok("sam")), "block shut down q")
	stopped, cancel := context.WithCancel(t.Context())
	cancel()
	_ = stopping.srv.Shutdown(stopped)
	if term, _ := checkLifecycle(t, b.events(tok("sam"), ticket), gen.EventTypeError); term.Kind != "shutdown" {
		t.Errorf("ask ended by a shutdown: %q, want shutdown", term.Kind)
	}
	if term, _ := checkLifecycle(t, b.events(tok("tim"), timedOut), gen.EventTypeError); term.Kind != "timeout" {
		t.Errorf("ask past its deadline: %q, want timeout", term.Kind)
	}

	redistest.Poll(t, "every replica's observer to see no ask running", func() bool {
		for _, o := range observers {
			if asksRunning(t, o) != 0 {
				return false
			}
		}
		return true
	})

	// Everything has ended: every key left has an expiry, but for the documented ones.
	keys := keyspace(t, rdb, prefix)
	if len(keys) == 0 {
		t.Fatal("no keys under the prefix: the scan is not looking where the store writes")
	}
	for k, d := range keys {
		if d < 0 && !slices.Contains(permanentKeys, keyName(k)) {
			t.Errorf("key %q has no expiry (PTTL %v): a leak", k, d)
		}
	}
	t.Logf("after the last end: %d keys under the prefix: %v", len(keys), kinds(keys))

	// And once the TTLs have passed (a webhook's delivery, the longest, lives from its ask's
	// admission past its deadline, a grace of 10 s and a lease, and then the TTL), the sweeps
	// have emptied the store-wide sets: only the generation is left.
	emptied := func() bool {
		keys = keyspace(t, rdb, prefix)
		for k := range keys {
			if keyName(k) != "generation" {
				return false
			}
		}
		return true
	}
	for until := time.Now().Add(deadline + 10*time.Second + lease + ttl + 15*time.Second); !emptied() && time.Now().Before(until); {
		select {
		case <-time.After(100 * time.Millisecond): // Redis expires keys on its own clock: nothing to wait on
		case <-t.Context().Done():
		}
	}
	if len(keys) != 1 {
		t.Errorf("left under the prefix: %v, want the generation only", keys)
	}
}

// kinds counts keys by kind (the key's name with its ids and owner left out), saying how many
// have an expiry.
func kinds(keys map[string]time.Duration) map[string]string {
	n, withTTL := map[string]int{}, map[string]int{}
	for k, d := range keys {
		name := keyName(k)
		switch {
		case strings.HasPrefix(name, "c:") && strings.HasSuffix(name, ":turns"):
			name = "c:<cid>:turns"
		case strings.HasPrefix(name, "c:"):
			name = "c:<cid>"
		case strings.HasPrefix(name, "t:"):
			if i := strings.LastIndexByte(name, ':'); i > 1 {
				name = "t:<tid>" + name[i:]
			} else {
				name = "t:<tid>"
			}
		case strings.HasPrefix(name, "o:"):
			name = name[:4] + "<owner>"
		case strings.HasPrefix(name, "idem:"):
			name = "idem:<owner><key>"
		case strings.HasPrefix(name, "wh:") && name != "wh:due":
			name = "wh:<tid>"
		}
		n[name]++
		if d > 0 {
			withTTL[name]++
		}
	}
	out := map[string]string{}
	for name, c := range n {
		out[name] = strconv.Itoa(c) + " (" + strconv.Itoa(withTTL[name]) + " with a TTL)"
	}
	return out
}

// asksRunning is o's ask_asks_running gauge.
func asksRunning(t *testing.T, o *obs.Observer) float64 {
	t.Helper()
	fams, err := o.Metrics().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "ask_asks_running" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("no ask_asks_running gauge")
	return 0
}
