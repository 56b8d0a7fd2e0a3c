package redis_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/storetest"
)

// A memory-only Redis restarted under an identity's first asks: the identity, finding the
// store empty, opens as many conversations as its cap allows before the runners notice their
// tickets are gone. Each runner's restore re-created its ask's conversation on top of those,
// without the caps, so the identity held more conversations than DAS_ASK_MAX_CONVERSATIONS_PER_ID
// (probed on three askd replicas: cap 5, three asks running across a redis-server restart, five
// conversations opened after it, then ZCARD of the owner's conversations read 8) and every
// create of its answered 429 until the extra ones expired. A restore re-creates a conversation
// only within the caps it was admitted under; past them the conversation stays gone, as one
// that held turns does, and the ticket is still restored and ended.
func TestRestoreKeepsTheConversationCaps(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	rc := raw(t, srv)
	turn := ask.Turn{Question: "q", Outcome: gen.EventTypeError, Text: "interrupted"}
	conv := func(s *redisstore.Store, id string, owner store.Owner, l store.Limits) error {
		return s.CreateConversation(ctx, store.Conversation{ID: id, Owner: owner, CreatedAt: time.Unix(1700000000, 0).UTC()}, l)
	}
	bob := store.Owner{Tenant: storetest.Alice.Tenant, OID: "bob"}
	for _, tc := range []struct {
		name   string
		limits store.Limits
		fill   func(s *redisstore.Store, l store.Limits) // what is created after the restart
		want   bool                                      // whether the conversation comes back
	}{
		{"room", store.Limits{MaxConversationsPerOwner: 2, MaxTickets: 10}, func(s *redisstore.Store, l store.Limits) {
			if err := conv(s, "n1", storetest.Alice, l); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"owner at its cap", store.Limits{MaxConversationsPerOwner: 2, MaxTickets: 10}, func(s *redisstore.Store, l store.Limits) {
			for _, id := range []string{"n1", "n2"} {
				if err := conv(s, id, storetest.Alice, l); err != nil {
					t.Fatal(err)
				}
			}
		}, false},
		{"store at its cap", store.Limits{MaxConversationsPerOwner: 5, MaxTickets: 2}, func(s *redisstore.Store, l store.Limits) {
			for _, id := range []string{"n1", "n2"} {
				if err := conv(s, id, bob, l); err != nil {
					t.Fatal(err)
				}
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "restorecaps:" + strconv.FormatUint(rand.Uint64(), 36) + ":"
			s := newStore(t, srv, redisstore.Options{Prefix: prefix})
			if err := conv(s, "c", storetest.Alice, tc.limits); err != nil {
				t.Fatal(err)
			}
			nt := store.NewTicket{ID: "t1", ConversationID: "c", Owner: storetest.Alice, CreatedAt: time.Unix(1700000000, 0),
				Accepted: storetest.Ev(1, gen.EventTypeAccepted), Limits: tc.limits}
			if _, err := s.CreateTicket(ctx, nt, tc.limits); err != nil {
				t.Fatal(err)
			}
			// The restart: every key of the store gone.
			keys, err := rc.Keys(ctx, "{"+prefix+"*").Result()
			if err != nil || len(keys) == 0 {
				t.Fatalf("keys: %v, %v", keys, err)
			}
			if err := rc.Del(ctx, keys...).Err(); err != nil {
				t.Fatal(err)
			}
			tc.fill(s, tc.limits)
			if err := s.Restore(ctx, nt, interruptedTail(3), turn); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if tk, err := s.Ticket(ctx, "t1"); err != nil || tk.State() != gen.AskStateError {
				t.Errorf("restored ticket %+v, %v; want it ended error", tk, err)
			}
			_, _, err = s.Conversation(ctx, "c")
			if got := err == nil; got != tc.want {
				t.Errorf("conversation re-created: %v (%v), want %v", got, err, tc.want)
			}
			if !tc.want && !errors.Is(err, store.ErrNotFound) {
				t.Errorf("conversation: %v, want ErrNotFound", err)
			}
		})
	}
}

// TestRestoreParksItsTurnBehindTheAskBefore: a restored ask whose conversation Redis still has
// held by an ask created before it (the ask before it, whose end the restart lost too) leaves
// its turn to be recorded right after that ask's, by whichever end that ask gets; held by an
// ask created after it (one admitted after the restart, in a conversation the restored ask no
// longer held), its turn is left out as before, rather than recorded out of order.
func TestRestoreParksItsTurnBehindTheAskBefore(t *testing.T) {
	srv := redistest.Start(t)
	parksItsTurn(t, func(t *testing.T, o redisstore.Options) *redisstore.Store { return newStore(t, srv, o) })
}

// TestRestoreParksItsTurnOnACluster is the same on a three-primary Redis Cluster: the restore
// reads the creation time of the ticket holding the conversation, a key in the same slot as the
// ticket's own (a conversation's tickets share their owner's bucket).
func TestRestoreParksItsTurnOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t, 3, 0)
	parksItsTurn(t, func(t *testing.T, o redisstore.Options) *redisstore.Store {
		o.URL = "redis+cluster://" + strings.Join(c.Addrs(), ",")
		s, err := redisstore.New(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func parksItsTurn(t *testing.T, open func(*testing.T, redisstore.Options) *redisstore.Store) {
	ctx := t.Context()
	t0 := time.Unix(1700000000, 0).UTC()
	for _, tc := range []struct {
		name   string
		holder time.Time // when the ask holding the conversation was created; the restored one at t0
		wantQ  []string
	}{
		{"held by the ask before", t0.Add(-time.Second), []string{"qA", "qB"}},
		{"held by a later ask", t0.Add(time.Second), []string{"qA"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "park:" + strconv.Itoa(rand.IntN(1<<30)) + ":"
			s := open(t, redisstore.Options{Prefix: prefix, Replica: "r1"})
			other := open(t, redisstore.Options{Prefix: prefix, Replica: "r2"})
			storetest.MustConv(t, s, "c", storetest.Alice)
			if _, err := s.CreateTicket(ctx, store.NewTicket{ID: "a", ConversationID: "c", Owner: storetest.Alice,
				CreatedAt: tc.holder, Accepted: storetest.Ev(1, gen.EventTypeAccepted)}, store.Limits{}); err != nil {
				t.Fatal(err)
			}
			// b is gone (its creation lost): its runner, on the other replica, restores it.
			nt := store.NewTicket{ID: "b", ConversationID: "c", Owner: storetest.Alice, CreatedAt: t0,
				Accepted: storetest.Ev(1, gen.EventTypeAccepted), Question: "qB", Turns: 1}
			if err := other.Restore(ctx, nt, interruptedTail(4), ask.Turn{Question: "qB", Outcome: gen.EventTypeError, Text: "interrupted"}); err != nil {
				t.Fatalf("restore: %v", err)
			}
			if err := other.End(ctx, "a", interruptedTail(2), ask.Turn{Question: "qA", Outcome: gen.EventTypeError, Text: "interrupted"}, false); err != nil {
				t.Fatalf("the end of the ask holding the conversation: %v", err)
			}
			_, turns, err := other.Conversation(ctx, "c")
			if err != nil {
				t.Fatal(err)
			}
			var qs []string
			for _, tr := range turns {
				qs = append(qs, tr.Question)
			}
			if !slices.Equal(qs, tc.wantQ) {
				t.Errorf("the conversation's turns %v, want %v", qs, tc.wantQ)
			}
			if _, err := storetest.NewTicket(t, other, "d", "c", storetest.Alice, store.Limits{}); err != nil {
				t.Errorf("the next ask in the conversation: %v", err)
			}
		})
	}
}
