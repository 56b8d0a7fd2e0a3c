package redis_test

import (
	"context"
	"crypto/rand"
	"math"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/storetest"
)

// serviceLimits are the service's default caps, as it passes them to the store.
var serviceLimits = store.Limits{MaxTickets: 10000, MaxInFlightPerOwner: 4, MaxConversationsPerOwner: 100, MaxRetainedPerOwner: 1000, MaxTurns: 50}

// unexpiring is every key under prefix without an expiry but those documented as kept (doc.go):
// the generation and each bucket's store-wide sets, which the lease sweep (Lapsed) empties.
func unexpiring(t *testing.T, rc *goredis.Client, prefix string) []string {
	t.Helper()
	var out []string
	it := rc.Scan(t.Context(), 0, "{"+prefix+"*", 1000).Iterator()
	for it.Next(t.Context()) {
		k := it.Val()
		name := k[strings.IndexByte(k, '}')+1:]
		switch name {
		case "generation", "convs", "tickets", "running", "wh:due":
			continue
		}
		if rc.PTTL(t.Context(), k).Val() == -1 {
			out = append(out, k)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRestoredAskLeavesNothing: a memory-only Redis restarts under a running ask (it loses
// everything), the runner restores the ask and ends it, and its owner then opens another
// conversation and never asks in it. Once the TTL has passed, nothing is left under the
// prefix but the generation. The restore scores the conversation in the owner's set at +inf,
// which read as "an ask runs": the owner's next conversation took its set out of expiry, for
// good (no ask of the owner would run again to give it one back). A set an earlier version
// left so gets its expiry back at the owner's next conversation.
func TestRestoredAskLeavesNothing(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	ctx := t.Context()
	prefix := "restored:" + rand.Text() + ":"
	const ttl = 300 * time.Millisecond
	s := newStore(t, srv, redisstore.Options{Prefix: prefix, TTL: ttl})
	conv := func(id string) error {
		return s.CreateConversation(ctx, store.Conversation{ID: id, Owner: storetest.Alice, CreatedAt: time.Now()}, serviceLimits)
	}
	nt := store.NewTicket{ID: "t1", ConversationID: "c1", Owner: storetest.Alice, CreatedAt: time.Now(),
		Accepted: storetest.Ev(1, gen.EventTypeAccepted)}
	if err := conv("c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateTicket(ctx, nt, serviceLimits); err != nil {
		t.Fatal(err)
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	turn := ask.Turn{Question: "q", Outcome: gen.EventTypeError, Text: "interrupted"}
	redistest.Poll(t, "the restore once Redis is back", func() bool {
		return s.Restore(ctx, nt, interruptedTail(3), turn) == nil
	})
	if err := conv("c2"); err != nil {
		t.Fatal(err)
	}
	if left := unexpiring(t, rc, prefix); len(left) > 0 {
		t.Errorf("keys without an expiry once the restored ask ended: %v", left)
	}
	// A set an earlier version's restore left with an entry at +inf: the owner's next
	// conversation gives it its expiry all the same.
	if err := rc.ZAdd(ctx, k0(prefix, "o:c:1:talice"), goredis.Z{Score: math.Inf(1), Member: "c0"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := conv("c3"); err != nil {
		t.Fatal(err)
	}
	if left := unexpiring(t, rc, prefix); len(left) > 0 {
		t.Errorf("keys without an expiry after a conversation beside a +inf entry: %v", left)
	}
	var left []string
	defer func() {
		if t.Failed() {
			t.Logf("left: %v", left)
		}
	}()
	redistest.Poll(t, "every key but the generation to expire", func() bool {
		if _, err := s.Lapsed(ctx, 100); err != nil { // the service's sweep, every quarter lease
			t.Fatal(err)
		}
		n, _, err := rc.Scan(ctx, 0, "{"+prefix+"*", 1000).Result()
		left = n
		return err == nil && (len(n) == 0 || len(n) == 1 && strings.HasSuffix(n[0], "}generation"))
	})
}

// TestHubForgetsExpiredTails: a finished ticket's tail, which answers replays from memory until
// the ticket's expiry, is let go once that has passed, with nothing read since: an idle replica
// does not hold the logs its readers read (up to the hub's bound, 64 MiB by default) for good.
func TestHubForgetsExpiredTails(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	const ttl = 300 * time.Millisecond
	s := newStore(t, srv, redisstore.Options{TTL: ttl})
	storetest.MustConv(t, s, "c", storetest.Alice)
	for _, id := range []string{"t1", "t2"} {
		if _, err := storetest.NewTicket(t, s, id, "c", storetest.Alice, store.Limits{}); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, id, storetest.Tail(2), ask.Turn{}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Read(ctx, id, 0); err != nil {
			t.Fatal(err)
		}
	}
	if tails, _ := redisstore.HubStats(s); tails != 2 {
		t.Fatalf("the hub holds %d tails after the reads, want 2", tails)
	}
	redistest.Poll(t, "the hub to let the expired tails go", func() bool {
		tails, bytes := redisstore.HubStats(s)
		return tails == 0 && bytes == 0
	})
}

// TestHubForgetsAbandonedTails: a replica whose reader read a running ticket run elsewhere,
// then left before its end (a stream dropped for good), learns of the end only as a change it
// does not read; its tail, never known finished, must still go once the ticket would have
// expired, as must a tail whose first read failed (its reader gone mid-read).
func TestHubForgetsAbandonedTails(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	const ttl = 300 * time.Millisecond
	prefix := "abandoned:" + rand.Text() + ":"
	runner := newStore(t, srv, redisstore.Options{Prefix: prefix, TTL: ttl})
	reader := newStore(t, srv, redisstore.Options{Prefix: prefix, TTL: ttl})
	storetest.MustConv(t, runner, "c", storetest.Alice)
	if _, err := storetest.NewTicket(t, runner, "t1", "c", storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	b, err := reader.Read(ctx, "t1", 0)
	if err != nil || b.Finished {
		t.Fatalf("read of the running ticket: %+v, %v", b, err)
	}
	if err := runner.Finish(ctx, "t1", storetest.Tail(2), ask.Turn{}); err != nil {
		t.Fatal(err)
	}
	<-b.Changed // the end's notification reached the reader's replica; nobody reads again
	// A first read whose reader leaves before Redis answers.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := reader.Read(gone, "t2", 0); err == nil {
		t.Fatal("a read with a cancelled context answered")
	}
	redistest.Poll(t, "the reader's hub to let the abandoned tail go", func() bool {
		tails, bytes := redisstore.HubStats(reader)
		return tails == 0 && bytes == 0
	})
}
