package server_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/webhook"
	"github.com/das-ask/ask/webhook/webhooktest"
)

func idemKey(k string) *gen.CreateAskParams { return &gen.CreateAskParams{IdempotencyKey: &k} }

// countingRunner answers at once and counts its runs.
func countingRunner(n *atomic.Int64) ask.Runner {
	return ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		n.Add(1)
		return ask.Outcome{Answer: answer("42")}
	})
}

func (h *harness) keyedAsk(tok, cid, key, q string) *gen.CreateAskResponse {
	h.t.Helper()
	h.secret(q)
	r, err := h.cw.CreateAskWithResponse(context.Background(), cid, idemKey(key), gen.AskRequest{Question: q}, bearer(tok))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) keyedConv(tok, key string) *gen.CreateConversationResponse {
	h.t.Helper()
	r, err := h.cw.CreateConversationWithResponse(context.Background(), &gen.CreateConversationParams{IdempotencyKey: &key}, gen.CreateConversationRequest{}, bearer(tok))
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// TestIdempotencyKeyCreateAsk: the same key and body answer the same 202, byte for byte, and
// run the ask once; another body is a 422; another identity's same key is its own.
func TestIdempotencyKeyCreateAsk(t *testing.T) {
	var runs atomic.Int64
	h := newHarness(t, server.Options{Runner: countingRunner(&runs)})
	cid := h.conv(alice)
	const q = "How many sev1 incidents did we have in 2026-Q2?"
	first := h.keyedAsk(alice, cid, "k-1", q)
	if first.StatusCode() != http.StatusAccepted || first.JSON202 == nil {
		t.Fatalf("first: %d %s", first.StatusCode(), first.Body)
	}
	h.events(alice, first.JSON202.Ticket)          // the run ends
	for _, key := range []string{"k-1", `"k-1"`} { // the draft's sf-string names the same key
		again := h.keyedAsk(alice, cid, key, q)
		if again.StatusCode() != http.StatusAccepted || string(again.Body) != string(first.Body) {
			t.Errorf("retry with %s: %d %s, want 202 %s", key, again.StatusCode(), again.Body, first.Body)
		}
		if got := again.HTTPResponse.Header.Get("Idempotent-Replayed"); got != "true" {
			t.Errorf("retry: Idempotent-Replayed %q", got)
		}
		if got, want := again.HTTPResponse.Header.Get("Location"), first.HTTPResponse.Header.Get("Location"); got != want {
			t.Errorf("retry: Location %q, want %q", got, want)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the ask ran %d times, want once", n)
	}

	other := h.keyedAsk(alice, cid, "k-1", "What does change failure rate mean?")
	p := problemOf(t, other.StatusCode(), other.HTTPResponse.Header.Get("Content-Type"), other.Body, http.StatusUnprocessableEntity)
	if p.Type != "urn:ask:problem:idempotency-key-reused" {
		t.Errorf("422 type %q", p.Type)
	}
	// The same key on another conversation is another request too.
	cid2 := h.conv(alice)
	if r := h.keyedAsk(alice, cid2, "k-1", q); r.StatusCode() != http.StatusUnprocessableEntity {
		t.Errorf("the key on another conversation: %d %s, want 422", r.StatusCode(), r.Body)
	}

	// Bob's k-1 is his own: a new ticket in his conversation.
	bc := h.conv(bob)
	br := h.keyedAsk(bob, bc, "k-1", q)
	if br.StatusCode() != http.StatusAccepted || br.JSON202.Ticket == first.JSON202.Ticket {
		t.Errorf("bob's ask with alice's key: %d %s", br.StatusCode(), br.Body)
	}
	h.events(bob, br.JSON202.Ticket)
	// A new key is a new ask.
	nr := h.keyedAsk(alice, cid, "k-2", q)
	if nr.StatusCode() != http.StatusAccepted || nr.JSON202.Ticket == first.JSON202.Ticket {
		t.Errorf("a new key: %d %s", nr.StatusCode(), nr.Body)
	}
	h.events(alice, nr.JSON202.Ticket)
	if n := runs.Load(); n != 3 {
		t.Errorf("%d runs, want 3", n)
	}
}

// TestIdempotencyKeyRefusedLeavesNoRecord: a refused request (404, 409 conflict) creates
// nothing and records nothing, so its retry is processed afresh.
func TestIdempotencyKeyRefusedLeavesNoRecord(t *testing.T) {
	started, stopped := make(chan string, 4), make(chan string, 4)
	h := newHarness(t, server.Options{Runner: blockingRunner(started, stopped)})
	cid := h.conv(alice)
	if r := h.keyedAsk(alice, "c_nope", "k", "the keyed question"); r.StatusCode() != http.StatusNotFound {
		t.Errorf("unknown conversation: %d %s", r.StatusCode(), r.Body)
	}
	running := h.ask(alice, cid, "first question")
	within(t, started, "first run")
	r := h.keyedAsk(alice, cid, "k", "the keyed question")
	problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusConflict)
	h.cancel(alice, running)
	within(t, stopped, "first run stopped")
	h.events(alice, running)
	ok := h.keyedAsk(alice, cid, "k", "the keyed question")
	if ok.StatusCode() != http.StatusAccepted {
		t.Fatalf("retry after the conflict ended: %d %s", ok.StatusCode(), ok.Body)
	}
	within(t, started, "retried run")
	h.cancel(alice, ok.JSON202.Ticket)
	within(t, stopped, "retried run stopped")
}

// TestIdempotencyKeyConversation: the same key answers the same conversation; a bad key is a
// 400 problem.
func TestIdempotencyKeyConversation(t *testing.T) {
	h := newHarness(t, server.Options{})
	a := h.keyedConv(alice, "conv-key")
	b := h.keyedConv(alice, "conv-key")
	if a.StatusCode() != http.StatusCreated || b.StatusCode() != http.StatusCreated || string(a.Body) != string(b.Body) {
		t.Errorf("two creates with one key: %d %s / %d %s", a.StatusCode(), a.Body, b.StatusCode(), b.Body)
	}
	if c := h.keyedConv(bob, "conv-key"); c.StatusCode() != http.StatusCreated || c.JSON201.Id == a.JSON201.Id {
		t.Errorf("bob's create with alice's key: %d %s", c.StatusCode(), c.Body)
	}
	if c := h.keyedConv(alice, "other-key"); c.JSON201 == nil || c.JSON201.Id == a.JSON201.Id {
		t.Errorf("a second key: %s", c.Body)
	}
	long := make([]byte, 256)
	for i := range long {
		long[i] = 'a'
	}
	for _, bad := range []string{"", "has space", "ünï", string(long), `"unbalanced`, `""`} {
		r := h.keyedConv(alice, bad)
		problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusBadRequest)
	}
	if r := h.keyedConv(alice, string(long[:255])); r.StatusCode() != http.StatusCreated {
		t.Errorf("a 255-character key: %d %s", r.StatusCode(), r.Body)
	}
}

// TestIdempotencyKeyConversationEmptyBody: a create with no body and one with {} are the same
// request (the body is optional and has no required field), so a retry that sends the other
// gets the same conversation, not a 422 "already used for a different request".
func TestIdempotencyKeyConversationEmptyBody(t *testing.T) {
	h := newHarness(t, server.Options{})
	create := func(key, body string) *gen.CreateConversationResponse {
		t.Helper()
		r, err := h.cw.CreateConversationWithBodyWithResponse(context.Background(), &gen.CreateConversationParams{IdempotencyKey: &key},
			"application/json", strings.NewReader(body), bearer(alice))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for i, pair := range [][2]string{{"", "{}"}, {"{}", ""}, {"", "{ }"}} {
		key := fmt.Sprintf("empty-%d", i)
		a, b := create(key, pair[0]), create(key, pair[1])
		if a.StatusCode() != http.StatusCreated || b.StatusCode() != http.StatusCreated || string(a.Body) != string(b.Body) {
			t.Errorf("%q then %q under one key: %d %s / %d %s", pair[0], pair[1], a.StatusCode(), a.Body, b.StatusCode(), b.Body)
		}
	}
	if r := create("empty-then-field", ""); r.StatusCode() != http.StatusCreated {
		t.Fatalf("no body: %d %s", r.StatusCode(), r.Body)
	}
	if r := create("empty-then-field", `{"x-other":1}`); r.StatusCode() == http.StatusCreated {
		t.Errorf("another body under the key: %d %s, want a refusal", r.StatusCode(), r.Body)
	}
}

// gatedStore holds CreateTicket (before) or CompleteIdempotent (after the ticket exists) of
// the first keyed create until released.
type gatedStore struct {
	*store.Memory
	mu            sync.Mutex
	holdCreate    chan struct{} // when set, the next CreateTicket waits for it
	holdConv      chan struct{} // when set, the next CreateConversation waits for it
	holdComplete  chan struct{} // when set, the next CompleteIdempotent waits for it
	reachedCreate chan struct{}
	// loseComplete: the next CompleteIdempotent is done, but its answer is lost
	// (store.ErrUnavailable), as a reply lost on the wire and never re-read.
	loseComplete bool
}

func (g *gatedStore) CreateTicket(ctx context.Context, nt store.NewTicket, l store.Limits) ([]ask.Turn, error) {
	g.wait(&g.holdCreate)
	return g.Memory.CreateTicket(ctx, nt, l)
}

func (g *gatedStore) CreateConversation(ctx context.Context, c store.Conversation, l store.Limits) error {
	g.wait(&g.holdConv)
	return g.Memory.CreateConversation(ctx, c, l)
}

func (g *gatedStore) CompleteIdempotent(ctx context.Context, o store.Owner, key, cand, final string, resp []byte) error {
	g.wait(&g.holdComplete)
	g.mu.Lock()
	lose := g.loseComplete
	g.loseComplete = false
	g.mu.Unlock()
	err := g.Memory.CompleteIdempotent(ctx, o, key, cand, final, resp)
	if lose {
		return store.ErrUnavailable
	}
	return err
}

// wait holds a call at *gate, when one is set, until the gate is closed, having said so on
// reachedCreate; it clears the gate, so only the next such call waits.
func (g *gatedStore) wait(gate *chan struct{}) {
	g.mu.Lock()
	hold := *gate
	*gate = nil
	g.mu.Unlock()
	if hold != nil {
		close(g.reachedCreate)
		<-hold
	}
}

// stallAt calls call in its own goroutine with g's *gate set, and returns once the call has
// waited there past its idempotency lock (10 s): a retry with the same key takes its record
// over. The call's answer comes on the channel once release is called.
func stallAt[T any](g *gatedStore, gate *chan struct{}, call func() T) (release func(), stalled <-chan T) {
	hold := make(chan struct{})
	g.mu.Lock()
	*gate = hold
	g.mu.Unlock()
	out := make(chan T, 1)
	go func() { out <- call() }()
	<-g.reachedCreate
	time.Sleep(11 * time.Second) // past the stalled attempt's lock
	return func() { close(hold) }, out
}

// stallKeyedAsk stalls a keyed ask through h at its CreateTicket past its lock (stallAt).
func (g *gatedStore) stallKeyedAsk(h *harness, cid, key, q string) (release func(), stalled <-chan *gen.CreateAskResponse) {
	return stallAt(g, &g.holdCreate, func() *gen.CreateAskResponse { return h.keyedAsk(alice, cid, key, q) })
}

// TestIdempotencyKeyInProgress: a duplicate while the first request is still being processed
// is a 409 with Retry-After; once the first completes the duplicate gets its response.
func TestIdempotencyKeyInProgress(t *testing.T) {
	var runs atomic.Int64
	hold := make(chan struct{})
	g := &gatedStore{Memory: store.NewMemory(store.MemoryOptions{}), holdCreate: hold, reachedCreate: make(chan struct{})}
	h := newHarness(t, server.Options{Store: g, Runner: countingRunner(&runs)})
	cid := h.conv(alice)
	firstDone := make(chan *gen.CreateAskResponse, 1)
	go func() { firstDone <- h.keyedAsk(alice, cid, "slow", "the slow question") }()
	<-g.reachedCreate
	dup := h.keyedAsk(alice, cid, "slow", "the slow question")
	p := problemOf(t, dup.StatusCode(), dup.HTTPResponse.Header.Get("Content-Type"), dup.Body, http.StatusConflict)
	if p.Type != "urn:ask:problem:idempotency-key-in-progress" || dup.HTTPResponse.Header.Get("Retry-After") == "" {
		t.Errorf("in-progress 409: type %q, Retry-After %q", p.Type, dup.HTTPResponse.Header.Get("Retry-After"))
	}
	close(hold)
	first := <-firstDone
	if first.StatusCode() != http.StatusAccepted {
		t.Fatalf("first: %d %s", first.StatusCode(), first.Body)
	}
	h.events(alice, first.JSON202.Ticket)
	if again := h.keyedAsk(alice, cid, "slow", "the slow question"); string(again.Body) != string(first.Body) {
		t.Errorf("after completion: %s, want %s", again.Body, first.Body)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

// TestIdempotencyKeyTakeover: the first request stalls after creating its ticket (a frozen
// replica) past the lock; a retry then answers that ticket rather than making another, and
// the stalled request, coming back, runs it: one ticket, one run.
func TestIdempotencyKeyTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int64
		g := &gatedStore{Memory: store.NewMemory(store.MemoryOptions{}), reachedCreate: make(chan struct{})}
		h := newHarness(t, server.Options{Store: g, Runner: countingRunner(&runs)})
		cid := h.conv(alice)
		release := make(chan struct{})
		g.mu.Lock()
		g.holdComplete = release
		g.mu.Unlock()
		firstDone := make(chan *gen.CreateAskResponse, 1)
		go func() { firstDone <- h.keyedAsk(alice, cid, "frozen", "the frozen question") }()
		<-g.reachedCreate
		if r := h.keyedAsk(alice, cid, "frozen", "the frozen question"); r.StatusCode() != http.StatusConflict {
			t.Errorf("within the lock: %d, want 409", r.StatusCode())
		}
		time.Sleep(11 * time.Second) // past the lock
		retry := h.keyedAsk(alice, cid, "frozen", "the frozen question")
		if retry.StatusCode() != http.StatusAccepted {
			t.Fatalf("retry after the lock: %d %s", retry.StatusCode(), retry.Body)
		}
		close(release)
		first := <-firstDone
		if first.StatusCode() != http.StatusAccepted || first.JSON202.Ticket != retry.JSON202.Ticket {
			t.Fatalf("the stalled request: %d %s; the retry answered %s", first.StatusCode(), first.Body, retry.Body)
		}
		h.events(alice, first.JSON202.Ticket)
		if n := runs.Load(); n != 1 {
			t.Errorf("%d runs, want 1", n)
		}
	})
}

// TestIdempotencyKeyAcrossReplicas: two replicas sharing one Redis; a create on A retried on
// B answers A's ticket (and conversation), and the ask runs once, on A.
func TestIdempotencyKeyAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "idem:" + rand.Text() + ":"
	var runsA, runsB atomic.Int64
	a := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, 0), Runner: countingRunner(&runsA)})
	b := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, 0), Runner: countingRunner(&runsB)})
	ca, cb := a.keyedConv(alice, "conv-x"), b.keyedConv(alice, "conv-x")
	if ca.JSON201 == nil || string(ca.Body) != string(cb.Body) {
		t.Fatalf("conversation on A %s, on B %s", ca.Body, cb.Body)
	}
	cid := ca.JSON201.Id
	ta := a.keyedAsk(alice, cid, "ask-x", "How many sev1 incidents did we have in 2026-Q2?")
	tb := b.keyedAsk(alice, cid, "ask-x", "How many sev1 incidents did we have in 2026-Q2?")
	if ta.StatusCode() != http.StatusAccepted || tb.StatusCode() != http.StatusAccepted || string(ta.Body) != string(tb.Body) {
		t.Fatalf("ask on A %d %s, retried on B %d %s", ta.StatusCode(), ta.Body, tb.StatusCode(), tb.Body)
	}
	b.events(alice, ta.JSON202.Ticket)
	if tc := b.keyedAsk(alice, cid, "ask-x", "another question"); tc.StatusCode() != http.StatusUnprocessableEntity {
		t.Errorf("another body on B: %d %s", tc.StatusCode(), tc.Body)
	}
	if a, b := runsA.Load(), runsB.Load(); a != 1 || b != 0 {
		t.Errorf("runs on A %d, on B %d; want 1 and 0", a, b)
	}
}

// TestIdempotencyKeyTakeoverLeavesOneTurn: the first request stalls before its ticket is made
// (a frozen replica) past the lock; the retry makes its own ticket, which runs and ends; then
// the stalled request comes back and its store makes its ticket after all. Nobody was told of
// that ticket: it is ended unrun and, like an ask answered "not started"
// (TestCreateWhoseOutcomeIsUnknown), it leaves no turn (the next ask's model sees the question
// once, answered, not a second time "cancelled", and the turn cap counts it once) and no
// webhook delivery (the receiver hears of the retry's ticket only).
func TestIdempotencyKeyTakeoverLeavesOneTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var histories [][]ask.Turn
		runner := ask.RunnerFunc(func(ctx context.Context, req ask.Request, _ ask.Emitter) ask.Outcome {
			mu.Lock()
			histories = append(histories, req.History)
			mu.Unlock()
			return ask.Outcome{Answer: answer("42")}
		})
		g := &madeStore{gatedStore: &gatedStore{Memory: store.NewMemory(store.MemoryOptions{}), reachedCreate: make(chan struct{})}}
		// Deliveries go to a port nothing listens on: what counts is whether one is due.
		hooks := webhook.Config{Allow: []string{"http://127.0.0.1:1/hooks/"}, Secrets: []string{webhooktest.Secret()},
			AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Timeout: time.Second}
		h := newHarness(t, server.Options{Store: g, Runner: runner, MaxTurns: 2, Webhooks: server.WebhookOptions{Config: hooks}})
		cid := h.conv(alice)
		const q = "the question asked once"
		keyed := func() *gen.CreateAskResponse {
			h.secret(q)
			r, err := h.cw.CreateAskWithResponse(context.Background(), cid, idemKey("frozen"),
				gen.AskRequest{Question: q, Webhook: &gen.WebhookRequest{Url: "http://127.0.0.1:1/hooks/x"}}, bearer(alice))
			if err != nil {
				t.Error(err)
			}
			return r
		}
		release, firstDone := stallAt(g.gatedStore, &g.holdCreate, keyed)
		retry := keyed()
		if retry.StatusCode() != http.StatusAccepted {
			t.Fatalf("retry after the lock: %d %s", retry.StatusCode(), retry.Body)
		}
		checkLifecycle(t, h.events(alice, retry.JSON202.Ticket), gen.EventTypeAnswer)
		release() // the stalled request's ticket is made now, in a conversation that is free
		if first := <-firstDone; first.StatusCode() == http.StatusAccepted {
			t.Fatalf("the stalled request answered 202 %s, though its retry was answered %s", first.Body, retry.Body)
		}
		stalled := g.made()[0]
		if stalled == retry.JSON202.Ticket {
			t.Fatalf("the stalled request's ticket is the retry's")
		}
		if st := h.status(alice, stalled); st.JSON200 == nil || st.JSON200.Webhook != nil {
			t.Errorf("the ticket nobody was told of: %d %s, want it ended with no webhook delivery", st.StatusCode(), st.Body)
		}
		next := h.ask(alice, cid, "the next question")
		checkLifecycle(t, h.events(alice, next), gen.EventTypeAnswer)
		mu.Lock()
		defer mu.Unlock()
		last := histories[len(histories)-1]
		if len(histories) != 2 || len(last) != 1 || last[0].Question != q || last[0].Outcome != gen.EventTypeAnswer {
			t.Errorf("%d runs; the next ask's history %+v, want the question once, answered", len(histories), last)
		}
	})
}

// madeStore is a gatedStore that records the id of every ticket creation it is asked for.
type madeStore struct {
	*gatedStore
	mu  sync.Mutex
	ids []string
}

func (m *madeStore) CreateTicket(ctx context.Context, nt store.NewTicket, l store.Limits) ([]ask.Turn, error) {
	m.mu.Lock()
	m.ids = append(m.ids, nt.ID)
	m.mu.Unlock()
	return m.gatedStore.CreateTicket(ctx, nt, l)
}

func (m *madeStore) made() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.ids)
}
