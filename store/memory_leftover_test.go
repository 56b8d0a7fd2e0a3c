package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/store/storetest"
)

// TestMemoryHoldsNothingAfterExpiry: every kind of use of the in-process store — asks answered,
// past the event bound, restored, refused by each cap, conversations refused, Idempotency-Key
// records completed and abandoned — leaves nothing once the TTL has passed with the store left
// idle: no map entry (an owner's counts at zero included), no queued expiry, no record.
func TestMemoryHoldsNothingAfterExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const ttl = time.Minute
		m := store.NewMemory(store.MemoryOptions{TTL: ttl, MaxEvents: 8})
		defer m.Close()
		limits := store.Limits{MaxTickets: 100, MaxInFlightPerOwner: 1, MaxConversationsPerOwner: 3, MaxRetainedPerOwner: 100, MaxTurns: 2}
		conv := func(id string, o store.Owner) error {
			return m.CreateConversation(ctx, store.Conversation{ID: id, Owner: o, CreatedAt: time.Now()}, limits)
		}
		want := func(err, target error, what string) {
			t.Helper()
			if !errors.Is(err, target) {
				t.Fatalf("%s: %v, want %v", what, err, target)
			}
		}
		turn := ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer, Text: "42"}
		for _, o := range []store.Owner{storetest.Alice, storetest.Bob} {
			p := o.OID + "-"
			r, err := m.BeginIdempotent(ctx, o, "conv-key", store.IdemBegin{Fingerprint: "fp", Candidate: p + "c1", Lock: time.Second, TTL: ttl})
			want(err, nil, "begin")
			want(conv(r.ID, o), nil, "conversation")
			want(m.CompleteIdempotent(ctx, o, "conv-key", r.ID, r.ID, []byte(`{}`)), nil, "complete")
			_, err = m.BeginIdempotent(ctx, o, "ask-key", store.IdemBegin{Fingerprint: "fp", Candidate: p + "t0", Lock: time.Second, TTL: ttl})
			want(err, nil, "begin")
			want(m.AbandonIdempotent(ctx, o, "ask-key", p+"t0"), nil, "abandon")

			// An answered ask past the event bound, and the refusals while it runs.
			_, err = storetest.NewTicket(t, m, p+"t1", p+"c1", o, limits)
			want(err, nil, "ticket")
			for seq := int64(2); seq < 20; seq++ {
				want(m.Append(ctx, p+"t1", storetest.Ev(seq, gen.EventTypeStep)), nil, "append")
			}
			want(conv(p+"c2", o), nil, "conversation")
			_, err = storetest.NewTicket(t, m, p+"t2", p+"c2", o, limits)
			want(err, store.ErrTooManyInFlight, "ask past the in-flight cap")
			_, err = storetest.NewTicket(t, m, p+"t2", p+"c1", o, limits)
			var conflict *store.ConflictError
			if !errors.As(err, &conflict) {
				t.Fatalf("second ask in a running conversation: %v, want a conflict", err)
			}
			want(m.Finish(ctx, p+"t1", storetest.Tail(20), turn), nil, "finish")

			// A second turn, then the conversation is full; a restored ask in another.
			_, err = storetest.NewTicket(t, m, p+"t3", p+"c1", o, limits)
			want(err, nil, "ticket")
			want(m.Finish(ctx, p+"t3", storetest.Tail(2), turn), nil, "finish")
			_, err = storetest.NewTicket(t, m, p+"t4", p+"c1", o, limits)
			want(err, store.ErrConversationFull, "ask past the turns cap")
			nt := store.NewTicket{ID: p + "t5", ConversationID: p + "c2", Owner: o, CreatedAt: time.Now(), Accepted: storetest.Ev(1, gen.EventTypeAccepted)}
			_, err = m.CreateTicket(ctx, nt, limits)
			want(err, nil, "ticket")
			want(m.Restore(ctx, nt, storetest.Tail(5), turn), nil, "restore")

			// Conversations past the identity's cap.
			want(conv(p+"c3", o), nil, "conversation")
			want(conv(p+"c4", o), store.ErrOwnerFull, "conversation past the cap")
		}
		if h := store.Held(m); h.Tickets == 0 || h.Idems == 0 {
			t.Fatalf("held before the TTL: %+v, want the tickets and records", h)
		}
		time.Sleep(ttl + time.Second) // idle: nothing else touches the store
		synctest.Wait()
		if h := store.Held(m); h != (store.MemoryHeld{}) {
			t.Errorf("held once everything expired: %+v, want nothing", h)
		}
	})
}

// TestMemoryAbandonedIdempotencyRecordsLeaveNothing: keyed creates that are refused (their
// record begun, then abandoned), each under a new key, keep nothing for the TTL: the purge
// order holds at most about twice the records still held, not an entry per refusal (a
// resource audit: 200,000 such requests held 80 MB for the TTL). The records still held
// expire as before.
func TestMemoryAbandonedIdempotencyRecordsLeaveNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const ttl = time.Minute
		m := store.NewMemory(store.MemoryOptions{TTL: ttl})
		defer m.Close()
		o := store.Owner{Tenant: "t", OID: "alice"}
		begin := func(key string) {
			t.Helper()
			r, err := m.BeginIdempotent(ctx, o, key, store.IdemBegin{Fingerprint: "fp", Candidate: "t_" + key, Lock: time.Second, TTL: ttl})
			if err != nil || r.State != store.IdemNew {
				t.Fatalf("begin %s: %+v %v", key, r, err)
			}
		}
		// Ten records kept (creates made, their keys completed), then 10,000 refused ones.
		for i := range 10 {
			key := fmt.Sprintf("kept-%d", i)
			begin(key)
			if err := m.CompleteIdempotent(ctx, o, key, "t_"+key, "t_"+key, []byte("{}")); err != nil {
				t.Fatal(err)
			}
		}
		for i := range 10_000 {
			key := fmt.Sprintf("refused-%d", i)
			begin(key)
			if err := m.AbandonIdempotent(ctx, o, key, "t_"+key); err != nil {
				t.Fatal(err)
			}
		}
		if h := store.Held(m); h.Idems != 10 || h.IdemOrder > 2*h.Idems+64 {
			t.Errorf("after 10,000 refused creates: %d records, %d in the purge order; want 10, at most %d", h.Idems, h.IdemOrder, 2*10+64)
		}
		// A kept record still answers its retry, and all expire with the TTL.
		r, err := m.BeginIdempotent(ctx, o, "kept-3", store.IdemBegin{Fingerprint: "fp", Candidate: "t_other", Lock: time.Second, TTL: ttl})
		if err != nil || r.State != store.IdemDone || r.ID != "t_kept-3" {
			t.Errorf("retry of a kept key: %+v %v, want done with its ticket", r, err)
		}
		time.Sleep(ttl + time.Second)
		synctest.Wait()
		if h := store.Held(m); h.Idems != 0 || h.IdemOrder != 0 {
			t.Errorf("past the TTL: %d records, %d in the purge order; want none", h.Idems, h.IdemOrder)
		}
	})
}
