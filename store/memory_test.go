package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/store/storetest"
)

// TestContract runs the store contract against the in-memory store.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, o storetest.Options) store.Store {
		m := store.NewMemory(store.MemoryOptions{MaxEvents: o.MaxEvents})
		t.Cleanup(func() { _ = m.Close() })
		return m
	})
}

func TestExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := store.NewMemory(store.MemoryOptions{TTL: time.Minute})
		defer m.Close()
		storetest.MustConv(t, m, "c", storetest.Alice)
		time.Sleep(50 * time.Second)
		if _, err := storetest.NewTicket(t, m, "t", "c", storetest.Alice, store.Limits{}); err != nil {
			t.Fatal(err)
		}
		b, _ := m.Read(ctx, "t", 1)
		time.Sleep(5 * time.Minute) // running: neither expires
		if _, _, err := m.Conversation(ctx, "c"); err != nil {
			t.Fatalf("conversation expired while its ask ran: %v", err)
		}
		_ = m.Finish(ctx, "t", storetest.Tail(2), ask.Turn{})
		<-b.Changed
		time.Sleep(59 * time.Second)
		if _, err := m.Ticket(ctx, "t"); err != nil {
			t.Fatalf("ticket gone before its TTL: %v", err)
		}
		if _, _, err := m.Conversation(ctx, "c"); err != nil {
			t.Fatalf("conversation gone before its TTL: %v", err)
		}
		time.Sleep(2 * time.Second)
		if _, err := m.Ticket(ctx, "t"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("ticket after its TTL: %v", err)
		}
		if _, _, err := m.Conversation(ctx, "c"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("conversation after its TTL: %v", err)
		}
		if _, err := m.Read(ctx, "t", 0); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("read after eviction: %v", err)
		}
	})
}

// TestExpiryInOrder: many conversations and tickets created over time expire each at its own
// TTL, in order, across the expiry queue's blocks; one touched again (an ask in it) lives a TTL
// from its ask's end, and its earlier expiry does nothing.
func TestExpiryInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const n, every, ttl = 700, 100 * time.Millisecond, 100 * time.Second // all made before the first expires
		m := store.NewMemory(store.MemoryOptions{TTL: ttl})
		defer m.Close()
		id := func(i int) string { return fmt.Sprintf("c%d", i) }
		for i := range n {
			storetest.MustConv(t, m, id(i), storetest.Alice)
			if i == 0 { // an ask in the first conversation, ended a little later
				if _, err := storetest.NewTicket(t, m, "t0", id(0), storetest.Alice, store.Limits{}); err != nil {
					t.Fatal(err)
				}
			}
			if i == 50 {
				if err := m.Finish(ctx, "t0", storetest.Tail(2), ask.Turn{}); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(every)
		}
		// Conversation i was created at i×every (and 0's ask ended at 51×every): it lives
		// until its TTL from then, the ticket as long as conversation 0.
		start := time.Now().Add(-n * every)
		for at := ttl - 5*time.Second; at < ttl+n*every+5*time.Second; at += 3 * time.Second {
			time.Sleep(time.Until(start.Add(at)))
			synctest.Wait()
			for i := range n {
				born := time.Duration(i) * every
				if i == 0 {
					born = 51 * every
				}
				_, _, err := m.Conversation(ctx, id(i))
				if live := at < born+ttl; live != (err == nil) {
					t.Fatalf("at %v: conversation %d (from %v): %v, want live %v", at, i, born, err, live)
				}
				if i == 0 {
					_, err := m.Ticket(ctx, "t0")
					if live := at < born+ttl; live != (err == nil) {
						t.Fatalf("at %v: the ticket (ended at %v): %v, want live %v", at, born, err, live)
					}
				}
			}
		}
	})
}

func TestCloseWakesReaders(t *testing.T) {
	m := store.NewMemory(store.MemoryOptions{})
	storetest.MustConv(t, m, "c", storetest.Alice)
	if _, err := storetest.NewTicket(t, m, "t", "c", storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	b, _ := m.Read(t.Context(), "t", 1)
	_ = m.Close()
	<-b.Changed
	if _, err := m.Read(t.Context(), "t", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("read after close: %v", err)
	}
}

// TestOwnerCapsFreedByExpiry: a conversation or ticket stops counting against its owner's cap
// when its TTL evicts it, and not before.
func TestOwnerCapsFreedByExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := store.NewMemory(store.MemoryOptions{TTL: time.Minute})
		defer m.Close()
		convs := store.Limits{MaxConversationsPerOwner: 1}
		tickets := store.Limits{MaxRetainedPerOwner: 1}
		newConv := func(id string) error {
			return m.CreateConversation(ctx, store.Conversation{ID: id, Owner: storetest.Alice}, convs)
		}
		if err := newConv("c1"); err != nil {
			t.Fatal(err)
		}
		if _, err := storetest.NewTicket(t, m, "t1", "c1", storetest.Alice, tickets); err != nil {
			t.Fatal(err)
		}
		_ = m.Finish(ctx, "t1", storetest.Tail(2), ask.Turn{})
		time.Sleep(59 * time.Second)
		if err := newConv("c2"); !errors.Is(err, store.ErrOwnerFull) {
			t.Errorf("a second conversation within the first's TTL: %v", err)
		}
		if _, err := storetest.NewTicket(t, m, "t2", "c1", storetest.Alice, tickets); !errors.Is(err, store.ErrOwnerFull) {
			t.Errorf("a second ticket within the first's TTL: %v", err)
		}
		time.Sleep(2 * time.Second)
		if err := newConv("c2"); err != nil {
			t.Errorf("a conversation once the first expired: %v", err)
		}
		if _, err := storetest.NewTicket(t, m, "t2", "c2", storetest.Alice, tickets); err != nil {
			t.Errorf("a ticket once the first expired: %v", err)
		}
	})
}

// TestMemoryRestore: the memory store ends a log that no longer continues its runner's seqs
// with a tail after a gap, never one that overlaps what it holds; the same end again is ok,
// another end is refused, and the conversation takes its turn and is free again.
func TestMemoryRestore(t *testing.T) {
	ctx := context.Background()
	m := store.NewMemory(store.MemoryOptions{})
	defer m.Close()
	storetest.MustConv(t, m, "c", storetest.Alice)
	if _, err := storetest.NewTicket(t, m, "t", "c", storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Append(ctx, "t", storetest.Ev(2, gen.EventTypeStep)); err != nil {
		t.Fatal(err)
	}
	nt := store.NewTicket{ID: "t", ConversationID: "c", Owner: storetest.Alice}
	turn := ask.Turn{Question: "q", Outcome: gen.EventTypeError}
	if err := m.Restore(ctx, nt, storetest.Tail(2), turn); !errors.Is(err, store.ErrSeq) {
		t.Fatalf("a tail over seq 2, which the log holds: %v, want ErrSeq", err)
	}
	if err := m.Restore(ctx, nt, storetest.Tail(5), turn); err != nil {
		t.Fatalf("a tail after a gap: %v", err)
	}
	if err := m.Restore(ctx, nt, storetest.Tail(5), turn); err != nil {
		t.Errorf("the same end again: %v, want ok", err)
	}
	if err := m.Restore(ctx, nt, storetest.Tail(9), turn); !errors.Is(err, store.ErrFinished) {
		t.Errorf("another end: %v, want ErrFinished", err)
	}
	b, err := m.Read(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, ev := range b.Events {
		seqs = append(seqs, ev.Seq)
	}
	if !b.Finished || !slices.Equal(seqs, []int64{1, 2, 5, 6, 7}) {
		t.Errorf("log seqs %v finished %v, want [1 2 5 6 7] finished", seqs, b.Finished)
	}
	history, err := storetest.NewTicket(t, m, "t2", "c", storetest.Alice, store.Limits{})
	if err != nil || len(history) != 1 || history[0] != turn {
		t.Errorf("the next ask in the conversation: history %v, err %v; want the restored turn", history, err)
	}
	if err := m.Restore(ctx, store.NewTicket{ID: "gone"}, storetest.Tail(2), turn); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a ticket the store does not hold: %v, want ErrNotFound", err)
	}
}

// TestOwnerFullSaysWhenOneFrees: an owner refused at a cap is told when the first of what holds
// it is due to expire (HeldError.Frees), others' entries and entries gone stale (a conversation
// touched again, one whose ask is running) passed over; with every conversation in use, the
// refusal cannot tell (ErrOwnerFull alone).
func TestOwnerFullSaysWhenOneFrees(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const ttl = time.Minute
		m := store.NewMemory(store.MemoryOptions{TTL: ttl})
		defer m.Close()
		convs := store.Limits{MaxConversationsPerOwner: 2}
		frees := func(err error) time.Duration {
			t.Helper()
			var held *store.HeldError
			if !errors.Is(err, store.ErrOwnerFull) {
				t.Fatalf("%v, want ErrOwnerFull", err)
			}
			if !errors.As(err, &held) {
				return 0
			}
			return held.Frees
		}
		storetest.MustConv(t, m, "b1", storetest.Bob) // due first, but bob's
		time.Sleep(5 * time.Second)
		storetest.MustConv(t, m, "a1", storetest.Alice)
		time.Sleep(10 * time.Second)
		storetest.MustConv(t, m, "a2", storetest.Alice)
		time.Sleep(10 * time.Second)
		if got := frees(m.CreateConversation(ctx, store.Conversation{ID: "a3", Owner: storetest.Alice}, convs)); got != ttl-20*time.Second {
			t.Errorf("a1 due in %v, want %v", got, ttl-20*time.Second)
		}
		// An ask in a1: a2 is due first now, and while a1's ask runs its old expiry is stale.
		if _, err := storetest.NewTicket(t, m, "t1", "a1", storetest.Alice, store.Limits{}); err != nil {
			t.Fatal(err)
		}
		if got := frees(m.CreateConversation(ctx, store.Conversation{ID: "a3", Owner: storetest.Alice}, convs)); got != ttl-10*time.Second {
			t.Errorf("a2 due in %v while a1's ask runs, want %v", got, ttl-10*time.Second)
		}
		if _, err := storetest.NewTicket(t, m, "t2", "a2", storetest.Alice, store.Limits{}); err != nil {
			t.Fatal(err)
		}
		if got := frees(m.CreateConversation(ctx, store.Conversation{ID: "a3", Owner: storetest.Alice}, convs)); got != 0 {
			t.Errorf("both conversations in use: due in %v, want no HeldError", got)
		}
		// The tickets: t1 ends now, t2 five seconds later; the first is due a TTL from t1's end.
		if err := m.Finish(ctx, "t1", storetest.Tail(2), ask.Turn{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		if err := m.Finish(ctx, "t2", storetest.Tail(2), ask.Turn{}); err != nil {
			t.Fatal(err)
		}
		_, err := storetest.NewTicket(t, m, "t3", "a1", storetest.Alice, store.Limits{MaxRetainedPerOwner: 2})
		if got := frees(err); got != ttl-5*time.Second {
			t.Errorf("t1 due in %v, want %v", got, ttl-5*time.Second)
		}
		// And a1's new idle time: due a TTL from t1's end too.
		if got := frees(m.CreateConversation(ctx, store.Conversation{ID: "a3", Owner: storetest.Alice}, convs)); got != ttl-5*time.Second {
			t.Errorf("a1 due in %v after its ask, want %v", got, ttl-5*time.Second)
		}
	})
}

// TestOwnerFullScanIsBounded: a refusal looks at MaxDueScan queued expiries at most, under the
// store's lock; an owner whose first due entry lies past them is refused with ErrOwnerFull alone.
func TestOwnerFullScanIsBounded(t *testing.T) {
	ctx := t.Context()
	for _, before := range []int{store.MaxDueScan - 1, store.MaxDueScan} {
		m := store.NewMemory(store.MemoryOptions{TTL: time.Hour})
		for i := range before {
			storetest.MustConv(t, m, fmt.Sprintf("b%d", i), storetest.Bob)
		}
		storetest.MustConv(t, m, "a1", storetest.Alice)
		err := m.CreateConversation(ctx, store.Conversation{ID: "a2", Owner: storetest.Alice}, store.Limits{MaxConversationsPerOwner: 1})
		held := errors.As(err, new(*store.HeldError))
		if !errors.Is(err, store.ErrOwnerFull) || held != (before < store.MaxDueScan) {
			t.Errorf("alice's entry after %d of bob's: %v (a HeldError: %v), want one only within the scan of %d", before, err, held, store.MaxDueScan)
		}
		_ = m.Close()
	}
}
