package redis_test

import (
	"errors"
	"math/rand/v2"
	"strconv"
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
