package store_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

var (
	alice = store.Owner{Tenant: "t", OID: "alice"}
	bob   = store.Owner{Tenant: "t", OID: "bob"}
)

func ev(seq int64, typ gen.EventType) store.Event {
	return store.Event{Seq: seq, Type: typ, Data: []byte(`{"seq":` + strconv.FormatInt(seq, 10) + `}`)}
}

func tail(from int64) []store.Event {
	return []store.Event{ev(from, gen.EventTypeBranch), ev(from+1, gen.EventTypeAnswer), ev(from+2, gen.EventTypeDone)}
}

func newTicket(t *testing.T, m *store.Memory, id, conv string, owner store.Owner, limits store.Limits) ([]ask.Turn, error) {
	t.Helper()
	return m.CreateTicket(t.Context(), store.NewTicket{ID: id, ConversationID: conv, Owner: owner, Accepted: ev(1, gen.EventTypeAccepted)}, limits)
}

func mustConv(t *testing.T, m *store.Memory, id string, owner store.Owner) {
	t.Helper()
	if err := m.CreateConversation(t.Context(), store.Conversation{ID: id, Owner: owner}, store.Limits{}); err != nil {
		t.Fatal(err)
	}
}

func TestAppendSeqAndEviction(t *testing.T) {
	ctx := t.Context()
	m := store.NewMemory(store.MemoryOptions{MaxEvents: 5})
	defer m.Close()
	mustConv(t, m, "c", alice)
	if _, err := newTicket(t, m, "t", "c", alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Append(ctx, "t", ev(3, gen.EventTypeStep)); !errors.Is(err, store.ErrSeq) {
		t.Errorf("append with a gap: %v, want ErrSeq", err)
	}
	if err := m.Append(ctx, "t", ev(1, gen.EventTypeStep)); !errors.Is(err, store.ErrSeq) {
		t.Errorf("append of a duplicate: %v, want ErrSeq", err)
	}
	// seq 2..9: milestone, step, step, milestone, step, step, step, milestone
	types := []gen.EventType{"milestone", "step", "step", "milestone", "step", "step", "step", "milestone"}
	for i, typ := range types {
		if err := m.Append(ctx, "t", ev(int64(i+2), typ)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := m.Read(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, e := range b.Events {
		got = append(got, e.Seq)
	}
	// The four oldest steps went; accepted and every milestone stayed.
	if want := []int64{1, 2, 5, 8, 9}; !equal(got, want) {
		t.Errorf("retained %v, want %v", got, want)
	}
	tk, _ := m.Ticket(ctx, "t")
	if tk.LastSeq != 9 || tk.Finished() || tk.State() != gen.AskStateRunning {
		t.Errorf("ticket %+v", tk)
	}
	if b, _ := m.Read(ctx, "t", 5); len(b.Events) != 2 || b.Events[0].Seq != 8 {
		t.Errorf("read after 5: %v", b.Events)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReadChangedAndFinish(t *testing.T) {
	ctx := t.Context()
	m := store.NewMemory(store.MemoryOptions{})
	defer m.Close()
	mustConv(t, m, "c", alice)
	if _, err := newTicket(t, m, "t", "c", alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	b, _ := m.Read(ctx, "t", 1)
	if len(b.Events) != 0 || b.Changed == nil || b.Finished {
		t.Fatalf("read at the end: %+v", b)
	}
	select {
	case <-b.Changed:
		t.Fatal("changed before any append")
	default:
	}
	_ = m.Append(ctx, "t", ev(2, gen.EventTypeBranch))
	select {
	case <-b.Changed:
	default:
		t.Fatal("append did not signal the reader")
	}
	b, _ = m.Read(ctx, "t", 2)
	if err := m.Finish(ctx, "t", []store.Event{ev(3, gen.EventTypeBranch), ev(4, gen.EventTypeBranch)}, ask.Turn{}); !errors.Is(err, store.ErrSeq) {
		t.Errorf("finish without terminal and done: %v", err)
	}
	if err := m.Finish(ctx, "t", tail(3), ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer, Text: "a"}); err != nil {
		t.Fatal(err)
	}
	<-b.Changed
	if err := m.Finish(ctx, "t", tail(6), ask.Turn{}); !errors.Is(err, store.ErrFinished) {
		t.Errorf("second finish: %v", err)
	}
	if err := m.Append(ctx, "t", ev(6, gen.EventTypeStep)); !errors.Is(err, store.ErrFinished) {
		t.Errorf("append after finish: %v", err)
	}
	b, _ = m.Read(ctx, "t", 0)
	if !b.Finished || b.Changed != nil || len(b.Events) != 5 {
		t.Errorf("read after finish: %+v", b)
	}
	tk, _ := m.Ticket(ctx, "t")
	if tk.State() != gen.AskStateAnswer || tk.Terminal.Seq != 4 || tk.Done.Seq != 5 {
		t.Errorf("finished ticket %+v", tk)
	}
	_, turns, _ := m.Conversation(ctx, "c")
	if len(turns) != 1 || turns[0].Text != "a" {
		t.Errorf("turns %+v", turns)
	}
}

func TestAdmission(t *testing.T) {
	ctx := t.Context()
	m := store.NewMemory(store.MemoryOptions{})
	defer m.Close()
	for _, c := range []string{"c1", "c2", "c3"} {
		mustConv(t, m, c, alice)
	}
	mustConv(t, m, "b1", bob)
	limits := store.Limits{MaxInFlightPerOwner: 2, MaxTickets: 3}
	if _, err := newTicket(t, m, "nope", "missing", alice, limits); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown conversation: %v", err)
	}
	if _, err := newTicket(t, m, "t1", "c1", alice, limits); err != nil {
		t.Fatal(err)
	}
	_, err := newTicket(t, m, "t2", "c1", alice, limits)
	var conflict *store.ConflictError
	if !errors.As(err, &conflict) || conflict.Ticket != "t1" || !errors.Is(err, store.ErrConflict) {
		t.Errorf("second ask in c1: %v", err)
	}
	if _, err := newTicket(t, m, "t2", "c2", alice, limits); err != nil {
		t.Fatal(err)
	}
	if _, err := newTicket(t, m, "t3", "c3", alice, limits); !errors.Is(err, store.ErrTooManyInFlight) {
		t.Errorf("third in flight: %v", err)
	}
	if _, err := newTicket(t, m, "t3", "b1", bob, limits); err != nil {
		t.Fatal(err)
	}
	_ = m.Finish(ctx, "t1", tail(2), ask.Turn{})
	if _, err := newTicket(t, m, "t4", "c3", alice, limits); !errors.Is(err, store.ErrFull) {
		t.Errorf("over the ticket cap: %v", err)
	}
	if _, err := m.Ticket(ctx, "t4"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused ticket exists: %v", err)
	}
	if err := m.CreateConversation(ctx, store.Conversation{ID: "c4"}, store.Limits{MaxTickets: 4}); !errors.Is(err, store.ErrFull) {
		t.Errorf("over the conversation cap: %v", err)
	}
}

func TestExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := store.NewMemory(store.MemoryOptions{TTL: time.Minute})
		defer m.Close()
		mustConv(t, m, "c", alice)
		time.Sleep(50 * time.Second)
		if _, err := newTicket(t, m, "t", "c", alice, store.Limits{}); err != nil {
			t.Fatal(err)
		}
		b, _ := m.Read(ctx, "t", 1)
		time.Sleep(5 * time.Minute) // running: neither expires
		if _, _, err := m.Conversation(ctx, "c"); err != nil {
			t.Fatalf("conversation expired while its ask ran: %v", err)
		}
		_ = m.Finish(ctx, "t", tail(2), ask.Turn{})
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

func TestCloseWakesReaders(t *testing.T) {
	m := store.NewMemory(store.MemoryOptions{})
	mustConv(t, m, "c", alice)
	if _, err := newTicket(t, m, "t", "c", alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	b, _ := m.Read(t.Context(), "t", 1)
	_ = m.Close()
	<-b.Changed
	if _, err := m.Read(t.Context(), "t", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("read after close: %v", err)
	}
}

// TestConcurrentReaders: readers following the log from every cursor while it is written see
// every seq after their cursor exactly once, in order (no step is evicted here).
func TestConcurrentReaders(t *testing.T) {
	ctx := t.Context()
	const n = 300
	m := store.NewMemory(store.MemoryOptions{MaxEvents: n + 10})
	defer m.Close()
	mustConv(t, m, "c", alice)
	if _, err := newTicket(t, m, "t", "c", alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	follow := func(after int64) error {
		for {
			b, err := m.Read(ctx, "t", after)
			if err != nil {
				return err
			}
			for _, e := range b.Events {
				if e.Seq != after+1 {
					return errors.New("got seq " + strconv.FormatInt(e.Seq, 10) + " after " + strconv.FormatInt(after, 10))
				}
				after = e.Seq
			}
			if b.Finished {
				if after != n+3 {
					return errors.New("finished at " + strconv.FormatInt(after, 10))
				}
				return nil
			}
			<-b.Changed
		}
	}
	errs := make(chan error, 40)
	for i := range 40 {
		go func() { errs <- follow(int64(i * 7 % 50)) }()
	}
	for seq := int64(2); seq <= n; seq++ {
		if err := m.Append(ctx, "t", ev(seq, gen.EventTypeMilestone)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Finish(ctx, "t", tail(n+1), ask.Turn{}); err != nil {
		t.Fatal(err)
	}
	for range 40 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
