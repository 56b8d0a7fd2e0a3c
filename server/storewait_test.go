package server_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/faultproxy"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// stallingStore is a shared Redis store whose Ticket and Webhook calls, once told to, hang
// until their caller's context ends, as against a Redis that stopped answering while a
// request was under way. owned reports when a Ticket call that still answers returns.
type stallingStore struct {
	*redisstore.Store
	tickets  atomic.Int64 // Ticket calls that still answer, then each stalls; negative: none stalls
	webhooks atomic.Bool  // Webhook calls stall
	reads    atomic.Bool  // Read calls stall
	owned    chan struct{}
}

func newStallingStore(t *testing.T) *stallingStore {
	srv := redistest.Start(t)
	s := &stallingStore{Store: replicaStore(t, srv, "sw:"+rand.Text()+":", 0), owned: make(chan struct{}, 1)}
	s.tickets.Store(-1)
	return s
}

func stalled(ctx context.Context) error {
	<-ctx.Done()
	return fmt.Errorf("stalled store: %w", ctx.Err())
}

func (s *stallingStore) Ticket(ctx context.Context, id string) (store.Ticket, error) {
	if n := s.tickets.Load(); n >= 0 {
		if s.tickets.Add(-1) < 0 {
			return store.Ticket{}, stalled(ctx)
		}
		defer func() { s.owned <- struct{}{} }()
	}
	return s.Store.Ticket(ctx, id)
}

func (s *stallingStore) Read(ctx context.Context, id string, after int64) (store.Batch, error) {
	if s.reads.Load() {
		return store.Batch{}, stalled(ctx)
	}
	return s.Store.Read(ctx, id, after)
}

func (s *stallingStore) Webhook(ctx context.Context, ticket string) (store.Webhook, error) {
	if s.webhooks.Load() {
		return store.Webhook{}, stalled(ctx)
	}
	return s.Store.Webhook(ctx, ticket)
}

// TestStatusThroughAStallMidRequest: each store call of a status waits for a stalled store at
// most StoreWait, not only its first (TestReadsThroughAStall stalls the store before the
// request, so the ticket's read answers 503 and nothing after it runs): the webhook's
// delivery read, and the ticket's read once a `Prefer: wait` sees the run end, answer 503 +
// Retry-After too when the store stops answering under way, where they waited for the store
// client's own read timeouts and retries.
func TestStatusThroughAStallMidRequest(t *testing.T) {
	const wait = 300 * time.Millisecond
	bounded := func(t *testing.T, what string, r func(ctx context.Context) (int, http.Header)) {
		t.Helper()
		// Only turns a wait for the store client's timeouts into a failure: the in-memory
		// stall lasts as long as the request's context.
		ctx, cancel := context.WithTimeout(t.Context(), 20*wait)
		defer cancel()
		start := time.Now()
		status, hdr := r(ctx)
		if took := time.Since(start); status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || ctx.Err() != nil {
			t.Errorf("%s with the store stalled under way: %d (Retry-After %q) after %v, want 503 with Retry-After within StoreWait (%v)",
				what, status, hdr.Get("Retry-After"), took, wait)
		}
	}
	getAsk := func(h *harness, ticket string, params *gen.GetAskParams) func(ctx context.Context) (int, http.Header) {
		return func(ctx context.Context) (int, http.Header) {
			r, err := h.cw.GetAskWithResponse(ctx, ticket, params, bearer(alice))
			if err != nil {
				return 0, nil
			}
			return r.StatusCode(), r.HTTPResponse.Header
		}
	}

	t.Run("the webhook's delivery", func(t *testing.T) {
		st := newStallingStore(t)
		secret := webhooktest.Secret()
		rcv := newReceiver(t, secret)
		h := newHarness(t, server.Options{Store: st, StoreWait: wait, Webhooks: server.WebhookOptions{Config: hookConfig(rcv, secret)}})
		r := h.askHook(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q2?", rcv.URL()+"/hooks/a")
		if r.JSON202 == nil {
			t.Fatalf("ask: %d %s", r.StatusCode(), r.Body)
		}
		_ = h.events(alice, r.JSON202.Ticket)
		st.webhooks.Store(true)
		defer st.webhooks.Store(false)
		bounded(t, "getAsk", getAsk(h, r.JSON202.Ticket, &gen.GetAskParams{}))
	})

	t.Run("the ticket once the run ends, with Prefer: wait", func(t *testing.T) {
		st := newStallingStore(t)
		gate := make(chan struct{})
		h := newHarness(t, server.Options{Store: st, StoreWait: wait, Runner: gatedRunner(1, 0, gate)})
		ticket := h.ask(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
		st.tickets.Store(1) // the request's ownership check answers; the store stalls after it
		go func() {
			<-st.owned // the status waits for the run's end
			close(gate)
		}()
		prefer := "wait=10"
		bounded(t, "getAsk with Prefer: wait=10", getAsk(h, ticket, &gen.GetAskParams{Prefer: &prefer}))
		st.tickets.Store(-1)
	})

	t.Run("the log, with Prefer: wait", func(t *testing.T) {
		st := newStallingStore(t)
		gate := make(chan struct{})
		defer close(gate)
		h := newHarness(t, server.Options{Store: st, StoreWait: wait, Runner: gatedRunner(1, 0, gate)})
		ticket := h.ask(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
		st.reads.Store(true) // the ticket's read answers; the log's does not
		prefer := "wait=10"
		bounded(t, "getAsk with Prefer: wait=10", getAsk(h, ticket, &gen.GetAskParams{Prefer: &prefer}))
		st.reads.Store(false)
	})
}

// TestCreateWhoseOutcomeIsUnknown: a create whose store took the creation but whose reply was
// lost after the request had given up on it (the 503 said the ask was not started) is ended at
// once, error{interrupted}, though the store client reports only that it never had an answer:
// the replica cannot tell a ticket it made from one it did not, so it ends what may exist.
// Left alone, the ticket would hold its conversation (409) until its lease lapsed.
func TestCreateWhoseOutcomeIsUnknown(t *testing.T) {
	u := startLostCreation(t, time.Second, 100*time.Millisecond)
	p, st, h, ends, cid := u.proxy, u.st, u.h, u.ends, u.cid
	const q = "How many sev1 incidents did we have in 2026-Q2? (its reply lost)"
	p.DropReplies(1, q, faultproxy.Stall) // the creation runs; its reply never comes
	r := h.askRaw(alice, cid, q)
	pr := problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)
	if pr.Detail == nil || !strings.Contains(*pr.Detail, "not started") {
		t.Fatalf("503 %v: want it to say the ask was not started", pr.Detail)
	}

	// The client's read timeout is a second; the lease a minute, after which any replica's
	// sweep would end the ticket: an end before then is the replica's own. The bound only
	// turns a missing end into a failure.
	select {
	case got := <-ends:
		if got.e.Outcome != gen.EventTypeError || got.e.Error == nil || got.e.Error.Kind != gen.ErrorKindInterrupted {
			t.Errorf("the ticket made after its request gave up ended %+v, want error{interrupted}", got.e)
		}
		// Its request was answered that it was not started: it leaves no turn, so the retry's
		// model does not see the question twice, the first time unanswered.
		if _, turns, err := st.Conversation(t.Context(), cid); err != nil || len(turns) != 0 {
			t.Errorf("the conversation's turns %+v (%v), want none: the late ask was answered 503 'not started'", turns, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the ticket the store made after its request gave up was not ended within 20 s (its lease is a minute)\n%s", h.logs.String())
	}
}

// TestCreateFailedWithItsOutcomeUnknown: a create whose store client gives up on the creation's
// reply before StoreWait (its read timed out, no retry left) cannot tell whether Redis ran the
// script; the request answers 503 "not started" and the replica ends what may exist at once,
// error{interrupted}, as for a creation still pending at StoreWait
// (TestCreateWhoseOutcomeIsUnknown). Answered "retry shortly" and left alone, the ticket would
// hold its conversation (409) until its lease lapsed.
func TestCreateFailedWithItsOutcomeUnknown(t *testing.T) {
	// A read timeout well inside StoreWait: the client's own error is the create's answer.
	u := startLostCreation(t, 200*time.Millisecond, 5*time.Second)
	p, st, h, ends, cid := u.proxy, u.st, u.h, u.ends, u.cid
	const q = "How many sev1 incidents did we have in 2026-Q2? (its reply lost, no retry)"
	p.DropReplies(1, q, faultproxy.Stall)
	start := time.Now()
	r := h.askRaw(alice, cid, q)
	took := time.Since(start)
	pr := problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)
	if pr.Detail == nil || !strings.Contains(*pr.Detail, "not started") {
		t.Errorf("503 %s: want it to say the ask was not started", r.Body)
	}
	if took >= 5*time.Second {
		t.Errorf("the create answered after %v: the client's error came first, not StoreWait", took)
	}
	select {
	case got := <-ends:
		if got.e.Outcome != gen.EventTypeError || got.e.Error == nil || got.e.Error.Kind != gen.ErrorKindInterrupted {
			t.Errorf("the ticket whose creation failed unseen ended %+v, want error{interrupted}", got.e)
		}
		if _, turns, err := st.Conversation(t.Context(), cid); err != nil || len(turns) != 0 {
			t.Errorf("the conversation's turns %+v (%v), want none: the ask was answered 503 'not started'", turns, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the ticket Redis made while its client gave up was not ended within 20 s (its lease is a minute)\n%s", h.logs.String())
	}
	// The conversation takes the next ask at once.
	if r := h.askRaw(alice, cid, "How many sev1 incidents did we have in 2026-Q3?"); r.StatusCode() != http.StatusAccepted {
		t.Errorf("the next ask in the conversation: %d %s", r.StatusCode(), r.Body)
	}
}

// lostCreation is the set-up of the tests of a creation whose reply is lost: a real Redis
// behind a fault proxy, a store client that never retries (so the creation's outcome is its
// read timeout), a service with the given StoreWait whose ends are reported on ends, a
// conversation cid of alice's, and one ask already answered, so that Redis knows the creation's
// script (a lost reply is then the creation's, not a NOSCRIPT's).
type lostCreation struct {
	proxy *faultproxy.Proxy
	st    *redisstore.Store
	h     *harness
	ends  chan ended
	cid   string
}

// ended is a run's end as the Ended hook reports it.
type ended struct {
	ticket string
	e      server.End
}

func startLostCreation(t *testing.T, readTimeout, storeWait time.Duration) lostCreation {
	t.Helper()
	srv := redistest.Start(t)
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	rc := goredis.NewClient(&goredis.Options{Addr: p.Addr(), ReadTimeout: readTimeout, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	st, err := redisstore.New(t.Context(), redisstore.Options{Client: rc, Prefix: "lost:" + rand.Text() + ":", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ends := make(chan ended, 4)
	h := newHarness(t, server.Options{Store: st, StoreWait: storeWait,
		Hooks: server.Hooks{Ended: func(ticket string, e server.End) { ends <- ended{ticket, e} }}})
	cid := h.conv(alice)
	warm := h.ask(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q1?")
	_ = h.events(alice, warm)
	if got := <-ends; got.ticket != warm {
		t.Fatalf("ended %s first, want %s", got.ticket, warm)
	}
	return lostCreation{proxy: p, st: st, h: h, ends: ends, cid: cid}
}

// TestKeyedCreateWhoseBeginWasLostRetriesAtOnce: a keyed createAsk whose first store call,
// the Idempotency-Key record's begin, Redis ran but whose reply was lost answers 503 "retry
// shortly", and its retry with the key is processed (202), not answered 409 "still in
// progress" for a request nobody processes until the record's 10 s lock lapses. Before, the
// record stayed held by the request that had answered 503 (an audit from outside: a keyed
// create during a SIGSTOPped redis-server answered 503, then every retry 409 for 10 s).
func TestKeyedCreateWhoseBeginWasLostRetriesAtOnce(t *testing.T) {
	u := startLostCreation(t, 200*time.Millisecond, 5*time.Second)
	p, h, ends, cid := u.proxy, u.h, u.ends, u.cid
	keyed := func(key, q string) *gen.CreateAskResponse {
		t.Helper()
		h.secret(q)
		r, err := h.cw.CreateAskWithResponse(t.Context(), cid, &gen.CreateAskParams{IdempotencyKey: &key}, gen.AskRequest{Question: q}, bearer(alice))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// A keyed ask first, so that Redis knows the record's scripts (a lost reply is then the
	// begin's, not a NOSCRIPT's).
	if r := keyed("warm-"+rand.Text(), "How many sev1 incidents did we have in 2026-Q1?"); r.StatusCode() != http.StatusAccepted {
		t.Fatalf("warm-up: %d %s", r.StatusCode(), r.Body)
	}
	<-ends

	key := "lost-begin-" + rand.Text()
	const q = "How many sev1 incidents did we have in 2026-Q2? (its key's record begun, the reply lost)"
	p.DropReplies(1, key, faultproxy.Stall)
	r := keyed(key, q)
	problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)
	if got := p.Stats().RepliesDropped; got == 0 {
		t.Fatal("no reply was dropped: the fault did not strike the begin")
	}
	// The retry, as a client retries a 503. The record is released by a goroutine once the
	// store answers, which may come just after the 503: a few retries may meet it held, but
	// not a hundred (the lock is 10 s).
	for range 100 {
		if r = keyed(key, q); r.StatusCode() != http.StatusConflict {
			break
		}
		runtime.Gosched()
	}
	if r.StatusCode() != http.StatusAccepted || r.JSON202 == nil {
		t.Fatalf("the retry with its key of a create answered 503: %d %s, want 202 (the first created nothing)", r.StatusCode(), r.Body)
	}
	if got := <-ends; got.ticket != r.JSON202.Ticket {
		t.Errorf("ended %s, want the retry's %s", got.ticket, r.JSON202.Ticket)
	}
}
