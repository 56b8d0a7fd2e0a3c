package redis_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/seal"
	"github.com/das-ask/ask/store/storetest"
)

// TestQuestionKeptWithTicket: the ticket keeps its question (NewTicket.Question), sealed at rest
// when the store seals (the raw field holds no question text), kept through Restore's
// re-creation; a ticket without one (created before) answers from its accepted event; a
// ticket sealed with a dropped key answers ErrNotFound, as its log does.
func TestQuestionKeptWithTicket(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	keys, err := seal.ParseKeys(seal.NewKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	const q = "sealed:v1: how many sev1 incidents in Q2?" // looks like a sealed value: must still round-trip
	for _, sealed := range []bool{false, true} {
		o := redisstore.Options{Prefix: "q:" + strings.Repeat("s", btoi(sealed)) + ":"}
		if sealed {
			o.Seal = keys
		}
		s := newStore(t, srv, o)
		ctx := t.Context()
		storetest.MustConv(t, s, "c", storetest.Alice)
		acc, _ := json.Marshal(map[string]string{"question": "from the accepted event"})
		nt := store.NewTicket{ID: "t", ConversationID: "c", Owner: storetest.Alice, CreatedAt: time.Unix(1700000000, 0).UTC(),
			Accepted: store.Event{Seq: 1, Type: gen.EventTypeAccepted, Data: acc}, Question: q}
		if _, err := s.CreateTicket(ctx, nt, store.Limits{}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Question(ctx, "t"); err != nil || got != q {
			t.Errorf("sealed %v: question %q, %v", sealed, got, err)
		}
		rawQ := rc.HGet(ctx, k0(o.Prefix, "t:t"), "q").Val()
		if sealed && (strings.Contains(rawQ, "sev1") || !seal.IsSealed([]byte(rawQ))) {
			t.Errorf("the sealed store holds the question as %q", rawQ)
		}
		// Gone (a restart that lost it), restored by its runner: the question is kept.
		rc.Del(ctx, k0(o.Prefix, "t:t"), k0(o.Prefix, "t:t:log"))
		if err := s.Restore(ctx, nt, storetest.Tail(5), ask.Turn{Question: q, Outcome: gen.EventTypeAnswer}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Question(ctx, "t"); err != nil || got != q {
			t.Errorf("sealed %v: question after Restore %q, %v", sealed, got, err)
		}
		// A ticket created before the store kept the question.
		rc.HDel(ctx, k0(o.Prefix, "t:t"), "q")
		if got, err := s.Question(ctx, "t"); err != nil || got != "from the accepted event" {
			t.Errorf("sealed %v: question of an older ticket %q, %v", sealed, got, err)
		}
		if _, err := s.Question(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("question of no ticket: %v", err)
		}
	}
	// Crypto-shredded: sealed with a key no longer configured.
	sealedStore := newStore(t, srv, redisstore.Options{Prefix: "qs:", Seal: keys})
	storetest.MustConv(t, sealedStore, "c", storetest.Alice)
	if _, err := sealedStore.CreateTicket(t.Context(), store.NewTicket{ID: "t", ConversationID: "c", Owner: storetest.Alice,
		Accepted: storetest.Ev(1, gen.EventTypeAccepted), Question: q}, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	other, _ := seal.ParseKeys(seal.NewKey("k2"))
	shredded := newStore(t, srv, redisstore.Options{Prefix: "qs:", Seal: other})
	if _, err := shredded.Question(t.Context(), "t"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a question sealed with a dropped key: %v, want ErrNotFound", err)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestWebhookURLSealed: a sealing store (the durable mode) seals a delivery's URL at rest, as it
// does the question: a chat service's incoming-webhook URL carries its token, and that Redis
// writes what it holds to disk. The deliverer reads it back whole; an instance without the key
// that sealed it finds no delivery (crypto-shredded, as the ticket is). Found by a black-box
// audit, which read the URL from Redis as it was sent.
func TestWebhookURLSealed(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	keys, err := seal.ParseKeys(seal.NewKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	const url = "https://hooks.example/services/T000/B000/secret-token-in-the-path"
	ctx := t.Context()
	for _, sealed := range []bool{false, true} {
		o := redisstore.Options{Prefix: "wu:" + strings.Repeat("s", btoi(sealed)) + ":"}
		if sealed {
			o.Seal = keys
		}
		s := newStore(t, srv, o)
		w := store.Webhook{Ticket: "t", ID: "msg_1", URL: url, Due: time.Now().Add(time.Minute), Expires: time.Now().Add(time.Hour)}
		if err := s.AddWebhook(ctx, w); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Webhook(ctx, "t"); err != nil || got.URL != url {
			t.Errorf("sealed %v: the delivery's URL %q, %v", sealed, got.URL, err)
		}
		rawURL := rc.HGet(ctx, k0(o.Prefix, "wh:t"), "url").Val()
		if sealed == strings.Contains(rawURL, "secret-token") {
			t.Errorf("sealed %v: Redis holds the URL as %q", sealed, rawURL)
		}
	}
	// Sealed to its ticket: the URL sealed for t, copied into another delivery's entry, does
	// not open there (it would send t2's outcome to t's receiver).
	sealedStore := newStore(t, srv, redisstore.Options{Prefix: "wu:s:", Seal: keys})
	w2 := store.Webhook{Ticket: "t2", ID: "msg_2", URL: "https://hooks.example/other", Due: time.Now().Add(time.Minute), Expires: time.Now().Add(time.Hour)}
	if err := sealedStore.AddWebhook(ctx, w2); err != nil {
		t.Fatal(err)
	}
	rc.HSet(ctx, k0("wu:s:", "wh:t2"), "url", rc.HGet(ctx, k0("wu:s:", "wh:t"), "url").Val())
	if got, err := sealedStore.Webhook(ctx, "t2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("t's sealed URL in t2's delivery: %q, %v, want ErrNotFound", got.URL, err)
	}
	other, _ := seal.ParseKeys(seal.NewKey("k2"))
	shredded := newStore(t, srv, redisstore.Options{Prefix: "wu:s:", Seal: other})
	if _, err := shredded.Webhook(ctx, "t"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a URL sealed with a dropped key: %v, want ErrNotFound", err)
	}
}

// TestIdempotencyFingerprintTaggedWhenSealed: the fingerprint of a keyed request is a hash of
// its body, which holds the question; a sealing store (whose Redis writes to disk) keeps a keyed
// tag of it, so the file lets no one test a guessed question against it, and a retry still
// matches, across a rotation of the seal keys too. Found by a black-box audit, which read the
// bare SHA-256 from the durable Redis's AOF.
func TestIdempotencyFingerprintTaggedWhenSealed(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	ctx := t.Context()
	k1, k2 := seal.NewKey("k1"), seal.NewKey("k2")
	before, err := seal.ParseKeys(k1)
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := seal.ParseKeys(k2 + "," + k1)
	if err != nil {
		t.Fatal(err)
	}
	const fp = "fp-zq-canary-0123456789abcdef"
	begin := func(s *redisstore.Store, fingerprint, candidate string) store.IdemState {
		t.Helper()
		res, err := s.BeginIdempotent(ctx, storetest.Alice, "key-1", store.IdemBegin{Fingerprint: fingerprint, Candidate: candidate, Lock: time.Minute, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return res.State
	}
	rawFP := func(prefix string) string {
		t.Helper()
		ks := rc.Keys(ctx, "{"+prefix+"*idem:*").Val()
		if len(ks) != 1 {
			t.Fatalf("idempotency records under %s: %v", prefix, ks)
		}
		return rc.HGet(ctx, ks[0], "fp").Val()
	}
	for _, sealed := range []bool{false, true} {
		o := redisstore.Options{Prefix: "if:" + strings.Repeat("s", btoi(sealed)) + ":"}
		if sealed {
			o.Seal = before
		}
		s := newStore(t, srv, o)
		if got := begin(s, fp, "t1"); got != store.IdemNew {
			t.Fatalf("sealed %v: first begin %v, want new", sealed, got)
		}
		if got := rawFP(o.Prefix); sealed == strings.Contains(got, "zq-canary") {
			t.Errorf("sealed %v: Redis holds the fingerprint as %q", sealed, got)
		}
		if got := begin(s, fp, "t2"); got != store.IdemBusy {
			t.Errorf("sealed %v: the same request again: %v, want busy", sealed, got)
		}
		if got := begin(s, fp+"x", "t3"); got != store.IdemMismatch {
			t.Errorf("sealed %v: another request: %v, want mismatch", sealed, got)
		}
	}
	// The seal keys rotated (a new key first): the record tagged before is still recognised.
	s := newStore(t, srv, redisstore.Options{Prefix: "if:s:", Seal: rotated})
	if got := begin(s, fp, "t4"); got != store.IdemBusy {
		t.Errorf("after a rotation, the same request: %v, want busy", got)
	}
	if got := begin(s, fp+"x", "t5"); got != store.IdemMismatch {
		t.Errorf("after a rotation, another request: %v, want mismatch", got)
	}
}
