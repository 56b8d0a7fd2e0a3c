package redis_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/logtest"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/seal"
	"github.com/das-ask/ask/store/storetest"
)

// newStore opens a store on srv under a fresh prefix (an empty store), closed with the test.
func newStore(t *testing.T, srv *redistest.Server, o redisstore.Options) *redisstore.Store {
	t.Helper()
	if o.Prefix == "" {
		o.Prefix = "test:" + rand.Text() + ":"
	}
	o.URL = srv.URL
	s, err := redisstore.New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// onRedis starts a private redis-server and opens a store on it with o, and a plain client to
// look at its keys with; all are closed with the test.
func onRedis(t *testing.T, o redisstore.Options) (*goredis.Client, *redisstore.Store) {
	t.Helper()
	srv := redistest.Start(t)
	return raw(t, srv), newStore(t, srv, o)
}

func raw(t *testing.T, srv *redistest.Server) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestContract runs the store contract against Redis.
func TestContract(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Run(t, func(t *testing.T, o storetest.Options) store.Store {
		return newStore(t, srv, redisstore.Options{MaxEvents: o.MaxEvents})
	})
}

// TestContractSealed runs the store contract against Redis with the question sealed at rest:
// sealing is invisible to every caller.
func TestContractSealed(t *testing.T) {
	srv := redistest.Start(t)
	keys, err := seal.ParseKeys(seal.NewKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Run(t, func(t *testing.T, o storetest.Options) store.Store {
		return newStore(t, srv, redisstore.Options{MaxEvents: o.MaxEvents, Seal: keys})
	})
}

// TestTTLFromTerminal: while a ticket runs neither it nor its conversation expires; Finish
// starts the TTL of the ticket's keys and of the conversation; the keys' expiry is then what
// makes them disappear (every call answers ErrNotFound).
func TestTTLFromTerminal(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	ctx := t.Context()
	const prefix = "ttl:"
	ttl := 90 * time.Second
	s := newStore(t, srv, redisstore.Options{Prefix: prefix, TTL: ttl})
	storetest.MustConv(t, s, "c", storetest.Alice)
	if d := rc.PTTL(ctx, k0(prefix, "c:c")).Val(); d <= ttl-5*time.Second || d > ttl {
		t.Errorf("a new conversation expires in %v, want about %v", d, ttl)
	}
	if _, err := storetest.NewTicket(t, s, "t", "c", storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	neverExpires(t, rc, k0(prefix, "c:c"), k0(prefix, "t:t"), k0(prefix, "t:t:log"))
	if err := s.Append(ctx, "t", storetest.Ev(2, gen.EventTypeStep)); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, "t", storetest.Tail(3), ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{k0(prefix, "c:c"), k0(prefix, "c:c:turns"), k0(prefix, "t:t"), k0(prefix, "t:t:log"), k0(prefix, "t:t:steps")} {
		if d := rc.PTTL(ctx, k).Val(); d <= ttl-5*time.Second || d > ttl {
			t.Errorf("%s expires in %v after the terminal event, want about %v", k, d, ttl)
		}
	}
	// Expiry, as Redis does it when the TTL passes.
	if err := rc.Del(ctx, k0(prefix, "c:c"), k0(prefix, "c:c:turns"), k0(prefix, "t:t"), k0(prefix, "t:t:log"), k0(prefix, "t:t:steps")).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ticket(ctx, "t"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ticket after expiry: %v", err)
	}
	if _, err := s.Read(ctx, "t", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("read after expiry: %v", err)
	}
	if _, _, err := s.Conversation(ctx, "c"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("conversation after expiry: %v", err)
	}
}

// TestCapacityCountsLiveTickets: the ticket cap counts tickets until their TTL ends.
func TestCapacityCountsLiveTickets(t *testing.T) {
	const prefix = "cap:"
	ctx := t.Context()
	rc, s := onRedis(t, redisstore.Options{Prefix: prefix})
	storetest.MustConv(t, s, "c1", storetest.Alice)
	storetest.MustConv(t, s, "c2", storetest.Alice)
	limits := store.Limits{MaxTickets: 1}
	if _, err := storetest.NewTicket(t, s, "t1", "c1", storetest.Alice, limits); err != nil {
		t.Fatal(err)
	}
	_ = s.Finish(ctx, "t1", storetest.Tail(2), ask.Turn{})
	if _, err := storetest.NewTicket(t, s, "t2", "c2", storetest.Alice, limits); !errors.Is(err, store.ErrFull) {
		t.Errorf("a finished ticket within its TTL did not count: %v", err)
	}
	// Its TTL passes: the index entry's score is its expiry.
	rc.ZAdd(ctx, k0(prefix, "tickets"), goredis.Z{Score: 1, Member: "t1"})
	if _, err := storetest.NewTicket(t, s, "t2", "c2", storetest.Alice, limits); err != nil {
		t.Errorf("an expired ticket still counted: %v", err)
	}
}

// TestNotificationsAcrossInstances: a reader on one instance is woken by an append through
// another (two replicas), and the appending instance is the only one allowed to append.
func TestNotificationsAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	a := newStore(t, srv, redisstore.Options{Prefix: "x:", Replica: "a"})
	b := newStore(t, srv, redisstore.Options{Prefix: "x:", Replica: "b"})
	storetest.MustConv(t, a, "c", storetest.Alice)
	if _, err := storetest.NewTicket(t, a, "t", "c", storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	batch, err := b.Read(ctx, "t", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Append(ctx, "t", storetest.Ev(2, gen.EventTypeStep)); !errors.Is(err, store.ErrFinished) {
		t.Errorf("append by a replica that does not run the ticket: %v, want ErrFinished", err)
	}
	if err := b.Finish(ctx, "t", storetest.Tail(2), ask.Turn{}); !errors.Is(err, store.ErrFinished) {
		t.Errorf("finish by a replica that does not run the ticket: %v, want ErrFinished", err)
	}
	if err := a.Append(ctx, "t", storetest.Ev(2, gen.EventTypeStep)); err != nil {
		t.Fatal(err)
	}
	storetest.Closed(t, batch.Changed, "append on another instance")
	got, _ := b.Read(ctx, "t", 1)
	if len(got.Events) != 1 || got.Events[0].Seq != 2 {
		t.Errorf("read on b after a's append: %+v", got)
	}
}

// TestCloseWakesReaders: Close wakes waiting readers.
func TestCloseWakesReaders(t *testing.T) {
	srv := redistest.Start(t)
	s, err := redisstore.New(t.Context(), redisstore.Options{URL: srv.URL, Prefix: "close:"})
	if err != nil {
		t.Fatal(err)
	}
	storetest.MustConv(t, s, "c", storetest.Alice)
	if _, err := storetest.NewTicket(t, s, "t", "c", storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	b, _ := s.Read(t.Context(), "t", 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	storetest.Closed(t, b.Changed, "close")
}

func TestNewFailsFast(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := redisstore.New(ctx, redisstore.Options{URL: "http://user:secret@example"}); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("a bad URL: %v", err)
	}
	if _, err := redisstore.New(ctx, redisstore.Options{URL: "redis://127.0.0.1:1/0"}); err == nil {
		t.Error("no error for a Redis that is not there")
	}
}

// TestRefusesPersistenceUnsealed: the question must not reach a disk readable, so New refuses
// a Redis that writes snapshots or an AOF unless the store seals (the durable mode), and says
// which mode it runs in.
func TestRefusesPersistenceUnsealed(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	newStore(t, srv, redisstore.Options{Logger: log})
	if !strings.Contains(logs.String(), "memory-only mode") {
		t.Errorf("the mode is not logged: %s", logs.String())
	}
	if err := rc.ConfigSet(t.Context(), "save", "3600 1").Err(); err != nil {
		t.Fatal(err)
	}
	defer rc.ConfigSet(context.Background(), "save", "")
	_, err := redisstore.New(t.Context(), redisstore.Options{URL: srv.URL, Logger: log})
	if err == nil || !strings.Contains(err.Error(), "DAS_ASK_SEAL_KEYS") {
		t.Fatalf("New over a persisting Redis without seal keys: %v, want a refusal naming DAS_ASK_SEAL_KEYS", err)
	}
	keys, err := seal.ParseKeys(seal.NewKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	newStore(t, srv, redisstore.Options{Logger: log, Seal: keys})
	if !strings.Contains(logs.String(), "durable mode") {
		t.Errorf("the durable mode is not logged: %s", logs.String())
	}
}

// TestHintsStreamNodeSize: a Redis whose streams preallocate more than a ticket's log holds
// (stream-node-max-bytes above 2048: the default is 4096) gets a hint at the start, and one
// set as docs/scale-out.md recommends gets none.
func TestHintsStreamNodeSize(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	for _, tc := range []struct {
		value string
		hint  bool
	}{{"4096", true}, {"0", true}, {"2048", false}, {"1024", false}} {
		if err := rc.ConfigSet(t.Context(), "stream-node-max-bytes", tc.value).Err(); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		newStore(t, srv, redisstore.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if got := strings.Contains(logs.String(), "stream-node-max-bytes is "+tc.value); got != tc.hint {
			t.Errorf("stream-node-max-bytes %s: hinted %v, want %v: %s", tc.value, got, tc.hint, logs.String())
		}
	}
}

// TestWarnsOfADurableModeThatLosesMore: the durable mode's recovery is built for a Redis that
// loses at most its last second (an AOF, appendfsync everysec); askd warns at the start when
// the Redis it seals for would lose more: no AOF (RDB snapshots only), or appendfsync no.
func TestWarnsOfADurableModeThatLosesMore(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	keys, err := seal.ParseKeys(seal.NewKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.ConfigSet(context.Background(), "save", "")
	defer rc.ConfigSet(context.Background(), "appendonly", "no")
	for _, tc := range []struct {
		save, aof, fsync, warn string
	}{
		{"3600 1", "no", "everysec", "without an append-only file"},
		{"", "yes", "no", "appendfsync no"},
		{"", "yes", "everysec", ""},
		{"3600 1", "yes", "always", ""},
	} {
		for name, v := range map[string]string{"save": tc.save, "appendonly": tc.aof, "appendfsync": tc.fsync} {
			if err := rc.ConfigSet(t.Context(), name, v).Err(); err != nil {
				t.Fatal(err)
			}
		}
		var logs bytes.Buffer
		newStore(t, srv, redisstore.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Seal: keys})
		warned := strings.Contains(logs.String(), "level=WARN")
		if tc.warn == "" && warned {
			t.Errorf("save %q appendonly %s appendfsync %s: warned: %s", tc.save, tc.aof, tc.fsync, logs.String())
		}
		if tc.warn != "" && (!warned || !strings.Contains(logs.String(), tc.warn)) {
			t.Errorf("save %q appendonly %s appendfsync %s: no warning %q: %s", tc.save, tc.aof, tc.fsync, tc.warn, logs.String())
		}
	}
}

// TestWarnsOfEviction: a Redis that evicts keys at its maxmemory would drop tickets and
// conversations silently (docs/scale-out.md, "Sizing Redis": noeviction), so askd warns at the
// start when its policy evicts and a maxmemory is set.
func TestWarnsOfEviction(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	defer rc.ConfigSet(context.Background(), "maxmemory", "0")
	defer rc.ConfigSet(context.Background(), "maxmemory-policy", "noeviction")
	for _, tc := range []struct {
		policy, max string
		warn        bool
	}{
		{"allkeys-lru", "1gb", true},
		{"volatile-ttl", "1gb", true},
		{"noeviction", "1gb", false},
		{"allkeys-lru", "0", false},
	} {
		for name, v := range map[string]string{"maxmemory-policy": tc.policy, "maxmemory": tc.max} {
			if err := rc.ConfigSet(t.Context(), name, v).Err(); err != nil {
				t.Fatal(err)
			}
		}
		var logs bytes.Buffer
		newStore(t, srv, redisstore.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if got := strings.Contains(logs.String(), "maxmemory-policy "+tc.policy+" evicts keys"); got != tc.warn {
			t.Errorf("maxmemory-policy %s maxmemory %s: warned %v, want %v: %s", tc.policy, tc.max, got, tc.warn, logs.String())
		}
	}
}

// TestOwnerCapsCountLiveEntries: the per-owner caps count an owner's conversations and tickets
// until their TTL ends; an owner's index lives while anything in it runs and expires with its
// last entry, so owners who hold nothing leave nothing behind.
func TestOwnerCapsCountLiveEntries(t *testing.T) {
	const prefix = "own:"
	ttl := 90 * time.Second
	rc, s := onRedis(t, redisstore.Options{Prefix: prefix, TTL: ttl})
	ctx := t.Context()
	owner := store.Owner{Tenant: "t", OID: "alice"}
	oc, ot := k0(prefix, "o:c:1:talice"), k0(prefix, "o:t:1:talice")
	convs := store.Limits{MaxConversationsPerOwner: 1}
	tickets := store.Limits{MaxRetainedPerOwner: 1}
	newConv := func(id string) error {
		return s.CreateConversation(ctx, store.Conversation{ID: id, Owner: owner}, convs)
	}
	if err := newConv("c1"); err != nil {
		t.Fatal(err)
	}
	if d := rc.PTTL(ctx, oc).Val(); d <= ttl-5*time.Second || d > ttl {
		t.Errorf("the owner's conversations expire in %v, want about %v", d, ttl)
	}
	if _, err := storetest.NewTicket(t, s, "t1", "c1", owner, tickets); err != nil {
		t.Fatal(err)
	}
	neverExpires(t, rc, oc, ot)
	if err := s.Finish(ctx, "t1", storetest.Tail(2), ask.Turn{}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{oc, ot} {
		if d := rc.PTTL(ctx, k).Val(); d <= ttl-5*time.Second || d > ttl {
			t.Errorf("%s expires in %v after the ask ended, want about %v", k, d, ttl)
		}
	}
	if err := newConv("c2"); !errors.Is(err, store.ErrOwnerFull) {
		t.Errorf("a second conversation within the first's TTL: %v", err)
	}
	if _, err := storetest.NewTicket(t, s, "t2", "c1", owner, tickets); !errors.Is(err, store.ErrOwnerFull) {
		t.Errorf("a second ticket within the first's TTL: %v", err)
	}
	// Their TTLs pass: the index entries' scores are their expiry, and the conversation's hash
	// expires with it (a conversation's entry counts while its hash lives: an ask may run in it).
	rc.ZAdd(ctx, oc, goredis.Z{Score: 1, Member: "c1"})
	rc.ZAdd(ctx, ot, goredis.Z{Score: 1, Member: "t1"})
	rc.Del(ctx, k0(prefix, "c:c1"))
	if err := newConv("c2"); err != nil {
		t.Errorf("an expired conversation still counted: %v", err)
	}
	if _, err := storetest.NewTicket(t, s, "t2", "c2", owner, tickets); err != nil {
		t.Errorf("an expired ticket still counted: %v", err)
	}
}

// k0 is the Redis key of rest under prefix in bucket 0, where the store keeps everything
// named by ids without a home (as these tests' ids are).
func k0(prefix, rest string) string { return "{" + prefix + "b0}" + rest }

// TestStoreWideCapsAndTheSweep: the store-wide tickets and conversations sets hold their expired
// entries until the cap is reached (creation then drops them, so the cap counts live entries
// exactly) or until a Lapsed sweep, which drops every expired entry of every bucket.
func TestStoreWideCapsAndTheSweep(t *testing.T) {
	const prefix = "wide:"
	ctx := t.Context()
	rc, s := onRedis(t, redisstore.Options{Prefix: prefix, TTL: 90 * time.Second})
	owner := store.Owner{Tenant: "t", OID: "alice"}
	limits := store.Limits{MaxTickets: 2}
	tickets, convs := k0(prefix, "tickets"), k0(prefix, "convs")
	for i, c := range []string{"c1", "c2"} {
		if err := s.CreateConversation(ctx, store.Conversation{ID: c, Owner: owner}, limits); err != nil {
			t.Fatal(err)
		}
		tid := "t" + strconv.Itoa(i+1)
		if _, err := storetest.NewTicket(t, s, tid, c, owner, limits); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, tid, storetest.Tail(2), ask.Turn{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := storetest.NewTicket(t, s, "t3", "c1", owner, limits); !errors.Is(err, store.ErrFull) {
		t.Errorf("a third ticket with two retained: %v, want ErrFull", err)
	}
	// t1's TTL passes (its entry's score is its expiry): at the cap, creation drops it.
	rc.ZAdd(ctx, tickets, goredis.Z{Score: 1, Member: "t1"})
	if _, err := storetest.NewTicket(t, s, "t3", "c1", owner, limits); err != nil {
		t.Errorf("an expired ticket still counted at the cap: %v", err)
	}
	if rc.ZScore(ctx, tickets, "t1").Err() != goredis.Nil {
		t.Error("the expired ticket is still in the set after creation met the cap")
	}
	// Below the cap nothing is dropped at creation; the sweep drops it.
	rc.ZAdd(ctx, tickets, goredis.Z{Score: 1, Member: "t2"})
	rc.ZAdd(ctx, convs, goredis.Z{Score: 1, Member: "c2"})
	rc.Del(ctx, k0(prefix, "c:c2")) // its hash expires with it
	if _, err := s.Lapsed(ctx, 10); err != nil {
		t.Fatal(err)
	}
	for key, id := range map[string]string{tickets: "t2", convs: "c2"} {
		if rc.ZScore(ctx, key, id).Err() != goredis.Nil {
			t.Errorf("%s: the expired %s is still there after a sweep", key, id)
		}
	}
	// t3 runs: the running set holds it (the tickets set takes it at its end).
	for key, id := range map[string]string{k0(prefix, "running"): "t3", convs: "c1"} {
		if err := rc.ZScore(ctx, key, id).Err(); err != nil {
			t.Errorf("%s: the live %s is gone after a sweep: %v", key, id, err)
		}
	}
}

// TestConversationCountsItsTurns: the conversation's hash counts its turns, which the turn cap
// reads; a conversation written before the count was kept falls back to the list's length.
func TestConversationCountsItsTurns(t *testing.T) {
	const prefix = "turns:"
	ctx := t.Context()
	rc, s := onRedis(t, redisstore.Options{Prefix: prefix})
	owner := store.Owner{Tenant: "t", OID: "alice"}
	limits := store.Limits{MaxTurns: 2}
	if err := s.CreateConversation(ctx, store.Conversation{ID: "c", Owner: owner}, limits); err != nil {
		t.Fatal(err)
	}
	for i, tid := range []string{"t1", "t2"} {
		history, err := storetest.NewTicket(t, s, tid, "c", owner, limits)
		if err != nil {
			t.Fatal(err)
		}
		if len(history) != i {
			t.Errorf("%s: %d turns of history, want %d", tid, len(history), i)
		}
		if err := s.Finish(ctx, tid, storetest.Tail(2), ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer, Text: "a"}); err != nil {
			t.Fatal(err)
		}
		if n := rc.HGet(ctx, k0(prefix, "c:c"), "turns").Val(); n != strconv.Itoa(i+1) {
			t.Errorf("after %s the hash counts %q turns, want %d", tid, n, i+1)
		}
	}
	if _, err := storetest.NewTicket(t, s, "t3", "c", owner, limits); !errors.Is(err, store.ErrConversationFull) {
		t.Errorf("a third turn at a cap of two: %v, want ErrConversationFull", err)
	}
	// A hash without the count: the list's length is the count.
	rc.HDel(ctx, k0(prefix, "c:c"), "turns")
	if _, err := storetest.NewTicket(t, s, "t3", "c", owner, limits); !errors.Is(err, store.ErrConversationFull) {
		t.Errorf("a third turn at a cap of two, uncounted: %v, want ErrConversationFull", err)
	}
	if _, err := storetest.NewTicket(t, s, "t3", "c", owner, store.Limits{MaxTurns: 3}); err != nil {
		t.Errorf("a third turn under a cap of three, uncounted: %v", err)
	}
}

// TestConversationUnderARunStaysCounted: an ask's creation leaves the conversations' sets alone
// and persists the conversation's hash instead, so an ask that outlives the conversation's TTL
// finds its entries' scores passed. They still count (the hash lives: a sweep scores them a
// minute ahead, as an ask runs there, and moves entries at +inf the same way), the owner's sets
// take no expiry while the ask runs, whatever else the owner creates meanwhile. The end leaves
// the sets alone too: the sweep after their scores pass scores them at the hash's new expiry,
// and drops them once it is gone.
func TestConversationUnderARunStaysCounted(t *testing.T) {
	const prefix = "under:"
	ttl := 90 * time.Second
	rc, s := onRedis(t, redisstore.Options{Prefix: prefix, TTL: ttl})
	ctx := t.Context()
	owner := store.Owner{Tenant: "t", OID: "alice"}
	oc, ot, convs := k0(prefix, "o:c:1:talice"), k0(prefix, "o:t:1:talice"), k0(prefix, "convs")
	one := store.Limits{MaxConversationsPerOwner: 1}
	if err := s.CreateConversation(ctx, store.Conversation{ID: "c1", Owner: owner}, one); err != nil {
		t.Fatal(err)
	}
	if _, err := storetest.NewTicket(t, s, "t1", "c1", owner, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if d := rc.PTTL(ctx, k0(prefix, "c:c1")).Val(); d != -1 {
		t.Errorf("the conversation expires in %v while its ask runs, want never (-1)", d)
	}
	// The ask outlives the conversation's TTL: its entries' scores pass.
	rc.ZAdd(ctx, oc, goredis.Z{Score: 1, Member: "c1"})
	rc.ZAdd(ctx, convs, goredis.Z{Score: 1, Member: "c1"})
	if err := s.CreateConversation(ctx, store.Conversation{ID: "c2", Owner: owner}, one); !errors.Is(err, store.ErrOwnerFull) {
		t.Errorf("a second conversation beside one an ask runs in, at a cap of one: %v, want ErrOwnerFull", err)
	}
	if err := s.CreateConversation(ctx, store.Conversation{ID: "c2", Owner: owner}, store.Limits{MaxTickets: 1}); !errors.Is(err, store.ErrFull) {
		t.Errorf("a second conversation beside one an ask runs in, at a store-wide cap of one: %v, want ErrFull", err)
	}
	if _, err := s.Lapsed(ctx, 10); err != nil {
		t.Fatal(err)
	}
	// A sweep looks at it again a minute on (the run is still on, or its end gave the hash an
	// expiry).
	ahead := func(what string, d time.Duration) {
		t.Helper()
		now := float64(time.Now().UnixMilli())
		for _, key := range []string{oc, convs} {
			if sc := rc.ZScore(ctx, key, "c1").Val(); sc < now+float64((d-5*time.Second).Milliseconds()) || sc > now+float64(d.Milliseconds()) {
				t.Errorf("%s: %s scores %.0f, want about now + %v", key, what, sc, d)
			}
		}
	}
	ahead("the conversation an ask runs in, after a sweep", time.Minute)
	// So does an entry at +inf (a restored ticket's conversation is scored so).
	rc.ZAdd(ctx, convs, goredis.Z{Score: math.Inf(1), Member: "c1"})
	rc.ZAdd(ctx, oc, goredis.Z{Score: math.Inf(1), Member: "c1"})
	if _, err := s.Lapsed(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateConversation(ctx, store.Conversation{ID: "c2", Owner: owner}, one); !errors.Is(err, store.ErrOwnerFull) {
		t.Errorf("a second conversation beside one an ask runs in, at a cap of one, after sweeps: %v, want ErrOwnerFull", err)
	}
	ahead("the conversation an ask runs in, at +inf, after a sweep", time.Minute)
	// Another conversation of the owner's, while the ask runs: the owner's sets keep no expiry.
	if err := s.CreateConversation(ctx, store.Conversation{ID: "c3", Owner: owner}, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	neverExpires(t, rc, oc, ot)
	if err := s.Finish(ctx, "t1", storetest.Tail(2), ask.Turn{}); err != nil {
		t.Fatal(err)
	}
	// The end leaves the sets alone: the ended ask's conversation still counts, and the sweep
	// after its score passes (the owner's at its cap, the bucket's by Lapsed) scores its
	// entries at its hash's new expiry.
	rc.ZAdd(ctx, oc, goredis.Z{Score: 1, Member: "c1"}) // the minute passes
	rc.ZAdd(ctx, convs, goredis.Z{Score: 1, Member: "c1"})
	if err := s.CreateConversation(ctx, store.Conversation{ID: "c4", Owner: owner}, store.Limits{MaxConversationsPerOwner: 2}); !errors.Is(err, store.ErrOwnerFull) {
		t.Errorf("a conversation beside two, one of them just ended, at a cap of two: %v, want ErrOwnerFull", err)
	}
	if _, err := s.Lapsed(ctx, 10); err != nil {
		t.Fatal(err)
	}
	ahead("the conversation, after its ask ended and a sweep", ttl)
	for _, k := range []string{oc, ot, k0(prefix, "c:c1")} {
		if d := rc.PTTL(ctx, k).Val(); d <= ttl-5*time.Second || d > ttl {
			t.Errorf("%s expires in %v after the ask ended, want about %v", k, d, ttl)
		}
	}
	// An entry a sweep scored +inf while its ask ran, whose hash has gone since: the next sweep
	// drops it.
	rc.ZAdd(ctx, convs, goredis.Z{Score: math.Inf(1), Member: "c1"})
	rc.Del(ctx, k0(prefix, "c:c1"))
	if _, err := s.Lapsed(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if err := rc.ZScore(ctx, convs, "c1").Err(); !errors.Is(err, goredis.Nil) {
		t.Errorf("a gone conversation's entry at +inf after a sweep: %v, want it dropped", err)
	}
}

// TestRunningConversationRecheckedWithinTheTTL: a store whose TTL is under a minute scores a
// running conversation's entries its TTL ahead, not a minute, so that once the ask has ended a
// conversation gone at its TTL leaves the sets within about two TTLs (a minute's linger would
// count it against the caps for a minute after it is gone).
func TestRunningConversationRecheckedWithinTheTTL(t *testing.T) {
	const prefix = "recheck:"
	const ttl = 10 * time.Second
	rc, s := onRedis(t, redisstore.Options{Prefix: prefix, TTL: ttl})
	ctx := t.Context()
	owner := store.Owner{Tenant: "t", OID: "alice"}
	oc, convs := k0(prefix, "o:c:1:talice"), k0(prefix, "convs")
	if err := s.CreateConversation(ctx, store.Conversation{ID: "c1", Owner: owner}, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := storetest.NewTicket(t, s, "t1", "c1", owner, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	// The ask outlives the conversation's TTL: its entries' scores pass.
	rc.ZAdd(ctx, oc, goredis.Z{Score: 1, Member: "c1"})
	rc.ZAdd(ctx, convs, goredis.Z{Score: 1, Member: "c1"})
	if _, err := s.Lapsed(ctx, 10); err != nil { // the bucket's set
		t.Fatal(err)
	}
	// The owner's set, swept by a creation at the owner's cap.
	if err := s.CreateConversation(ctx, store.Conversation{ID: "c2", Owner: owner}, store.Limits{MaxConversationsPerOwner: 1}); !errors.Is(err, store.ErrOwnerFull) {
		t.Fatalf("a second conversation beside one an ask runs in, at a cap of one: %v, want ErrOwnerFull", err)
	}
	now := float64(time.Now().UnixMilli())
	for _, key := range []string{oc, convs} {
		if sc := rc.ZScore(ctx, key, "c1").Val(); sc < now+float64((ttl-5*time.Second).Milliseconds()) || sc > now+float64(ttl.Milliseconds()) {
			t.Errorf("%s: the running conversation scores now %+.0f ms, want about now + %v", key, sc-now, ttl)
		}
	}
}

// TestSweepGetsOnPastRunningConversations: the Lapsed sweep looks at a bounded number of
// conversation entries at a time; entries of conversations asks run in, however many sort
// first, are moved out of its way (scored a minute ahead), so a gone conversation's entry
// behind them is dropped by a later sweep.
func TestSweepGetsOnPastRunningConversations(t *testing.T) {
	const prefix = "past:"
	rc, s := onRedis(t, redisstore.Options{Prefix: prefix})
	ctx := t.Context()
	convs := k0(prefix, "convs")
	const running = 1200 // more than one sweep looks at
	_, err := rc.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i := range running {
			id := fmt.Sprintf("r%04d", i)
			p.HSet(ctx, k0(prefix, "c:"+id), "running", "t") // persisted: an ask runs there
			p.ZAdd(ctx, convs, goredis.Z{Score: math.Inf(1), Member: id})
		}
		p.ZAdd(ctx, convs, goredis.Z{Score: math.Inf(1), Member: "zz-gone"}) // no hash
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.Lapsed(ctx, 10); err != nil {
			t.Fatal(err)
		}
	}
	if err := rc.ZScore(ctx, convs, "zz-gone").Err(); !errors.Is(err, goredis.Nil) {
		t.Errorf("a gone conversation's entry behind %d running ones, after three sweeps: %v, want it dropped", running, err)
	}
	if n := rc.ZCard(ctx, convs).Val(); n != running {
		t.Errorf("%d entries after the sweeps, want the %d running conversations'", n, running)
	}
}

// TestTicketReadsItsEndFromTheLog: a finished ticket's hash names its terminal event and done,
// which the log holds; Ticket reads them from the log's last entries, or by seq when the tail
// put them elsewhere, and from the hash's own copy for a ticket ended when the hash kept one.
func TestTicketReadsItsEndFromTheLog(t *testing.T) {
	const prefix = "end:"
	ctx := t.Context()
	rc, s := onRedis(t, redisstore.Options{Prefix: prefix})
	ev := func(seq int64, typ gen.EventType) store.Event {
		return store.Event{Seq: seq, Type: typ, Data: []byte(`{"seq":` + strconv.FormatInt(seq, 10) + `,"type":"` + string(typ) + `"}`)}
	}
	check := func(id string, term, done store.Event) {
		t.Helper()
		tk, err := s.Ticket(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Terminal == nil || tk.Done == nil {
			t.Fatalf("%s: finished without its terminal or done: %+v", id, tk)
		}
		if tk.Terminal.Seq != term.Seq || tk.Terminal.Type != term.Type || string(tk.Terminal.Data) != string(term.Data) {
			t.Errorf("%s: terminal %d %s %s, want %d %s %s", id, tk.Terminal.Seq, tk.Terminal.Type, tk.Terminal.Data, term.Seq, term.Type, term.Data)
		}
		if tk.Done.Seq != done.Seq || string(tk.Done.Data) != string(done.Data) {
			t.Errorf("%s: done %d %s, want %d %s", id, tk.Done.Seq, tk.Done.Data, done.Seq, done.Data)
		}
	}
	for i, tc := range []struct {
		tail []store.Event
		term int
	}{
		{[]store.Event{ev(2, gen.EventTypeBranch), ev(3, gen.EventTypeAnswer), ev(4, gen.EventTypeDone)}, 1}, // as the service ends a log
		{[]store.Event{ev(2, gen.EventTypeError), ev(3, gen.EventTypeBranch), ev(4, gen.EventTypeBranch), ev(5, gen.EventTypeDone)}, 0},
	} {
		c, id := "c"+strconv.Itoa(i), "t"+strconv.Itoa(i)
		storetest.MustConv(t, s, c, storetest.Alice)
		if _, err := storetest.NewTicket(t, s, id, c, storetest.Alice, store.Limits{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, id, tc.tail, ask.Turn{}); err != nil {
			t.Fatal(err)
		}
		if rc.HExists(ctx, k0(prefix, "t:"+id), "done").Val() {
			t.Errorf("%s: the hash keeps a copy of done", id)
		}
		check(id, tc.tail[tc.term], tc.tail[len(tc.tail)-1])
		// A retry of the end (its reply lost) reads done back from the log: ok.
		if err := s.Finish(ctx, id, tc.tail, ask.Turn{}); err != nil {
			t.Errorf("%s: the end retried: %v", id, err)
		}
	}
	// A ticket ended when the hash kept a copy of both: the copies.
	term, done := ev(3, gen.EventTypeAnswer), ev(4, gen.EventTypeDone)
	term.Data, done.Data = []byte(`{"copy":"term"}`), []byte(`{"copy":"done"}`)
	rc.HSet(ctx, k0(prefix, "t:t0"), "term", term.Data, "done", done.Data)
	check("t0", term, done)
}

// neverExpires fails t unless every key exists without an expiry, as the keys an ask runs on must.
func neverExpires(t *testing.T, rc *goredis.Client, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if d := rc.PTTL(t.Context(), k).Val(); d != -1 {
			t.Errorf("%s expires in %v while an ask runs, want never (-1)", k, d)
		}
	}
}

// TestSaysWhenRedisLostEverything: a store that finds its generation replaced (Redis restarted
// without what it held) warns, and a durable one says how the Redis it meets now persists: an
// audit restarted a durable mode's Redis with --appendonly no, losing every ticket, and the
// store's only line was its subscription's reconnect.
func TestSaysWhenRedisLostEverything(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	keys, err := seal.ParseKeys(seal.NewKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.ConfigSet(context.Background(), "appendonly", "no")
	if err := rc.ConfigSet(t.Context(), "appendonly", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Buffer{}
	s := newStore(t, srv, redisstore.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), Seal: keys})
	first, err := s.Generation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := s.Generation(t.Context()); again != first || strings.Contains(logs.String(), "lost everything") {
		t.Fatalf("generation %q then %q: %s", first, again, logs.String())
	}
	// What a restart without the AOF leaves: nothing, and a Redis that does not persist.
	for _, cmd := range [][]any{{"config", "set", "appendonly", "no"}, {"flushall"}} {
		if err := rc.Do(t.Context(), cmd...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	next, err := s.Generation(t.Context())
	if err != nil || next == first {
		t.Fatalf("generation %q after the loss (%v), was %q", next, err, first)
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "Redis lost everything it held") || !strings.Contains(out, "was="+first) {
		t.Errorf("no warning of the loss: %s", out)
	}
	if !strings.Contains(out, "memory-only mode: Redis does not persist") {
		t.Errorf("the durable store did not say Redis no longer persists: %s", out)
	}
}

// TestOwnerFullSaysWhenOneFrees: the scripts' refusal at an owner's cap says when the first of
// what holds it is due to expire, by Redis's clock: for the conversations the soonest of their
// hashes' expiries (an ask's end pushes a hash's on and leaves the sets' scores where they were),
// passing over those an ask runs in; for the retained tickets the soonest score.
func TestOwnerFullSaysWhenOneFrees(t *testing.T) {
	const ttl = time.Hour
	srv := redistest.Start(t)
	s := newStore(t, srv, redisstore.Options{TTL: ttl})
	rdb := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := t.Context()
	due := func(what string, err error, want time.Duration) {
		t.Helper()
		var held *store.HeldError
		if !errors.As(err, &held) {
			t.Fatalf("%s: %v, want a HeldError", what, err)
		}
		// Within a minute: the test's own steps take that at most.
		if held.Frees > want || held.Frees < want-time.Minute {
			t.Errorf("%s: due in %v, want %v", what, held.Frees, want)
		}
	}
	third := func(o store.Owner) error {
		return s.CreateConversation(ctx, store.Conversation{ID: "x3", Owner: o, CreatedAt: time.Now()},
			store.Limits{MaxConversationsPerOwner: 2})
	}
	for _, c := range []string{"a1", "a2"} {
		storetest.MustConv(t, s, c, storetest.Alice)
	}
	due("a third conversation", third(storetest.Alice), ttl)
	// As if asks had ended in both, a2's later: their hashes live on past their scores.
	for c, d := range map[string]time.Duration{"a1": 3 * ttl, "a2": 2 * ttl} {
		if err := rdb.PExpire(ctx, redisstore.ConvKey(s, c), d).Err(); err != nil {
			t.Fatal(err)
		}
	}
	due("a third conversation after asks", third(storetest.Alice), 2*ttl)
	// Both of bob's with an ask running: none is due, and the store cannot say when.
	for i, c := range []string{"b1", "b2"} {
		storetest.MustConv(t, s, c, storetest.Bob)
		if _, err := storetest.NewTicket(t, s, fmt.Sprintf("tb%d", i), c, storetest.Bob, store.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := third(storetest.Bob); !errors.Is(err, store.ErrOwnerFull) || errors.As(err, new(*store.HeldError)) {
		t.Errorf("a third conversation while both run: %v, want ErrOwnerFull alone", err)
	}

	for _, tk := range []string{"t1", "t2"} {
		if _, err := storetest.NewTicket(t, s, tk, "a1", storetest.Alice, store.Limits{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, tk, storetest.Tail(2), ask.Turn{}); err != nil {
			t.Fatal(err)
		}
	}
	// t1 made due after t2: t2 is the first.
	if err := rdb.ZAddXX(ctx, redisstore.OwnerTicketsKey(s, "t1", storetest.Alice),
		goredis.Z{Score: float64(time.Now().Add(3 * ttl).UnixMilli()), Member: "t1"}).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := storetest.NewTicket(t, s, "t3", "a1", storetest.Alice, store.Limits{MaxRetainedPerOwner: 2})
	due("a third ticket", err, ttl)
}
