// Package storetest is the store contract (package store's documentation) as tests any
// implementation runs: Run(t, factory) with a factory that makes a fresh, empty store. The
// in-memory store and the Redis store both run it. What needs a clock (expiry) is each
// implementation's own test, since only the implementation knows how its time passes.
package storetest

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// Options are what a contract test asks of the store it gets.
type Options struct {
	// MaxEvents is the bound on retained events; 0 means the store's default.
	MaxEvents int
}

// Factory returns a fresh, empty store for one test and registers its cleanup with t.
type Factory func(t *testing.T, o Options) store.Store

// Owners the tests use.
var (
	Alice = store.Owner{Tenant: "t", OID: "alice"}
	Bob   = store.Owner{Tenant: "t", OID: "bob"}
)

// signalWithin bounds how long a change signal may take to arrive (a shared store delivers
// it over the network). It only bounds a failure; a passing test never waits for it.
const signalWithin = 10 * time.Second

// Run runs the contract against stores from f.
func Run(t *testing.T, f Factory) {
	t.Run("AppendSeqAndEviction", func(t *testing.T) { testAppendSeqAndEviction(t, f) })
	t.Run("ReadChangedAndFinish", func(t *testing.T) { testReadChangedAndFinish(t, f) })
	t.Run("Admission", func(t *testing.T) { testAdmission(t, f) })
	t.Run("ConversationTurns", func(t *testing.T) { testConversationTurns(t, f) })
	t.Run("ConcurrentReaders", func(t *testing.T) { testConcurrentReaders(t, f) })
	t.Run("ConversationsPerOwner", func(t *testing.T) { testConversationsPerOwner(t, f) })
	t.Run("DropConversation", func(t *testing.T) { testDropConversation(t, f) })
	t.Run("RetainedPerOwner", func(t *testing.T) { testRetainedPerOwner(t, f) })
	t.Run("MaxTurns", func(t *testing.T) { testMaxTurns(t, f) })
	t.Run("OtherOwnersConversation", func(t *testing.T) { testOtherOwnersConversation(t, f) })
	t.Run("Idempotency", func(t *testing.T) { testIdempotency(t, f) })
	t.Run("RetriedWrites", func(t *testing.T) { testRetriedWrites(t, f) })
	t.Run("Homes", func(t *testing.T) { testHomes(t, f) })
	t.Run("CreateWithThen", func(t *testing.T) { testCreateWithThen(t, f) })
	t.Run("AppendBatch", func(t *testing.T) { testAppendBatch(t, f) })
}

// Evs are events of type typ at seqs from, from+1, …, n of them.
func Evs(from int64, n int, typ gen.EventType) []store.Event {
	out := make([]store.Event, n)
	for i := range out {
		out[i] = Ev(from+int64(i), typ)
	}
	return out
}

// testAppendBatch: a batch lands whole and in order, with one change signal; a retry of it,
// whole or overlapping the log's end with the same events, answers ok and appends only what is
// new; any other overlap, a gap or seqs that do not run on by one append nothing; the
// evictions the bound made are reported; a finished ticket refuses a batch.
func testAppendBatch(t *testing.T, f Factory) {
	ctx := t.Context()
	m := f(t, Options{MaxEvents: 8})
	MustConv(t, m, "c", Alice)
	if _, err := NewTicket(t, m, "t", "c", Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	b0, err := m.Read(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	batch := append([]store.Event{Ev(2, gen.EventTypeBranch)}, Evs(3, 3, gen.EventTypeStep)...) // 2..5
	if n, err := m.AppendBatch(ctx, "t", batch); err != nil || n != 0 {
		t.Fatalf("batch 2..5: %d evicted, %v", n, err)
	}
	Closed(t, b0.Changed, "the reader's change signal after a batch")
	for _, tc := range []struct {
		name string
		evs  []store.Event
		want error
	}{
		{"the same batch again (a lost reply)", batch, nil},
		{"its last event again", batch[3:], nil},
		{"empty", nil, store.ErrSeq},
		{"a gap", Evs(7, 2, gen.EventTypeStep), store.ErrSeq},
		{"seqs not running on", []store.Event{Ev(6, gen.EventTypeStep), Ev(8, gen.EventTypeStep)}, store.ErrSeq},
		{"overlapping with other events", Evs(5, 2, gen.EventTypeMilestone), store.ErrSeq},
		{"wholly before the end", Evs(2, 2, gen.EventTypeStep), store.ErrSeq},
		{"at seq 0", Evs(0, 2, gen.EventTypeStep), store.ErrSeq},
		{"at a negative seq", Evs(-3, 2, gen.EventTypeStep), store.ErrSeq},
		// So far below the log that the distance to its last seq passes an int64.
		{"at the least seq there is", Evs(math.MinInt64, 2, gen.EventTypeStep), store.ErrSeq},
	} {
		if n, err := m.AppendBatch(ctx, "t", tc.evs); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) || n != 0 {
			t.Errorf("%s: %d evicted, %v; want 0, %v", tc.name, n, err, tc.want)
		}
	}
	if tk, _ := m.Ticket(ctx, "t"); tk.LastSeq != 5 {
		t.Fatalf("last seq %d after the refused batches, want 5", tk.LastSeq)
	}
	// Overlapping the end with the same event at 5: 6..7 are new.
	over := append([]store.Event{batch[3]}, Evs(6, 2, gen.EventTypeStep)...)
	if n, err := m.AppendBatch(ctx, "t", over); err != nil || n != 0 {
		t.Fatalf("batch 5..7 over a log ending at 5: %d, %v", n, err)
	}
	// 8..11: the log holds 7, so the bound of 8 evicts the three oldest steps (3, 4, 5).
	if n, err := m.AppendBatch(ctx, "t", Evs(8, 4, gen.EventTypeStep)); err != nil || n != 3 {
		t.Fatalf("batch 8..11 past the bound: %d evicted, %v; want 3", n, err)
	}
	b, err := m.Read(ctx, "t", 0)
	if want := []int64{1, 2, 6, 7, 8, 9, 10, 11}; err != nil || !equal(seqs(b.Events), want) {
		t.Fatalf("log %v, %v; want %v", seqs(b.Events), err, want)
	}
	// The tail (branch close, answer, done) at the bound evicts the oldest steps 6, 7, 8.
	if n, err := m.FinishCounted(ctx, "t", Tail(12), ask.Turn{}); err != nil || n != 3 {
		t.Fatalf("the end at the bound: %d evicted, %v; want 3", n, err)
	}
	if n, err := m.FinishCounted(ctx, "t", Tail(12), ask.Turn{}); err != nil || n != 0 {
		t.Errorf("the end again (a lost reply): %d evicted, %v; want 0, ok", n, err)
	}
	if b, _ := m.Read(ctx, "t", 0); !equal(seqs(b.Events), []int64{1, 2, 9, 10, 11, 12, 13, 14}) {
		t.Errorf("log after the end %v", seqs(b.Events))
	}
	if _, err := m.AppendBatch(ctx, "t", Evs(15, 2, gen.EventTypeStep)); !errors.Is(err, store.ErrFinished) {
		t.Errorf("a batch after the end: %v, want ErrFinished", err)
	}
	if _, err := m.AppendBatch(ctx, "nope", Evs(2, 1, gen.EventTypeStep)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a batch to no ticket: %v, want ErrNotFound", err)
	}
}

// testCreateWithThen: NewTicket.Then is in the log with accepted, from the creation on; a
// retried creation answers ok; Then that does not continue at seq 2, or holds a step, creates
// nothing.
func testCreateWithThen(t *testing.T, f Factory) {
	ctx := t.Context()
	m := f(t, Options{})
	MustConv(t, m, "c", Alice)
	nt := store.NewTicket{ID: "t", ConversationID: "c", Owner: Alice, CreatedAt: time.Unix(1700000000, 0).UTC(),
		Accepted: Ev(1, gen.EventTypeAccepted)}
	for _, bad := range [][]store.Event{{Ev(3, gen.EventTypeBranch)}, {Ev(2, gen.EventTypeStep)}} {
		nt.Then = bad
		if _, err := m.CreateTicket(ctx, nt, store.Limits{}); !errors.Is(err, store.ErrSeq) {
			t.Errorf("Then %v: %v, want ErrSeq", seqs(bad), err)
		}
		if _, err := m.Ticket(ctx, "t"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the refused ticket exists: %v", err)
		}
	}
	nt.Then = []store.Event{Ev(2, gen.EventTypeBranch)}
	for range 2 {
		if _, err := m.CreateTicket(ctx, nt, store.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	b, err := m.Read(ctx, "t", 0)
	if err != nil || !equal(seqs(b.Events), []int64{1, 2}) || b.Events[1].Type != gen.EventTypeBranch {
		t.Fatalf("read %v, %v", seqs(b.Events), err)
	}
	if tk, _ := m.Ticket(ctx, "t"); tk.LastSeq != 2 {
		t.Errorf("last seq %d, want 2", tk.LastSeq)
	}
	if err := m.Append(ctx, "t", Ev(3, gen.EventTypeStep)); err != nil {
		t.Errorf("append after Then: %v", err)
	}
}

// ID is the id name gets for owner in s: with a store.Homed store, it ends with "-" and the
// owner's home, as the service mints ids.
func ID(s store.Store, owner store.Owner, name string) string {
	if h, ok := s.(store.Homed); ok {
		return name + "-" + h.Home(owner)
	}
	return name
}

// testHomes: ids placed by their owner's home (store.Homed) behave as any id, for many owners
// (spread over a homed store's places): each owner's caps are exact, and an owner's ask in
// another's conversation is not found wherever the other's home is.
func testHomes(t *testing.T, f Factory) {
	ctx := t.Context()
	m := f(t, Options{})
	var owners []store.Owner
	for i := range 12 {
		owners = append(owners, store.Owner{Tenant: "t" + strconv.Itoa(i%3), OID: "o" + strconv.Itoa(i)})
	}
	limits := store.Limits{MaxInFlightPerOwner: 1, MaxConversationsPerOwner: 2, MaxRetainedPerOwner: 2}
	for i, o := range owners {
		c1, c2, c3 := ID(m, o, "c1_"+strconv.Itoa(i)), ID(m, o, "c2_"+strconv.Itoa(i)), ID(m, o, "c3_"+strconv.Itoa(i))
		for _, c := range []string{c1, c2} {
			if err := m.CreateConversation(ctx, store.Conversation{ID: c, Owner: o, CreatedAt: time.Unix(1700000000, 0).UTC()}, limits); err != nil {
				t.Fatalf("owner %d: conversation: %v", i, err)
			}
		}
		if err := m.CreateConversation(ctx, store.Conversation{ID: c3, Owner: o}, limits); !errors.Is(err, store.ErrOwnerFull) {
			t.Errorf("owner %d: a third conversation: %v, want ErrOwnerFull", i, err)
		}
		t1, t2 := ID(m, o, "t1_"+strconv.Itoa(i)), ID(m, o, "t2_"+strconv.Itoa(i))
		if _, err := NewTicket(t, m, t1, c1, o, limits); err != nil {
			t.Fatalf("owner %d: ticket: %v", i, err)
		}
		if _, err := NewTicket(t, m, t2, c2, o, limits); !errors.Is(err, store.ErrTooManyInFlight) {
			t.Errorf("owner %d: a second ask in flight: %v, want ErrTooManyInFlight", i, err)
		}
		if err := m.Append(ctx, t1, Ev(2, gen.EventTypeStep)); err != nil {
			t.Fatal(err)
		}
		if err := m.Finish(ctx, t1, Tail(3), ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer, Text: "a"}); err != nil {
			t.Fatal(err)
		}
		tk, err := m.Ticket(ctx, t1)
		if err != nil || tk.Owner != o || tk.ConversationID != c1 || !tk.Finished() {
			t.Errorf("owner %d: ticket %+v, %v", i, tk, err)
		}
		b, err := m.Read(ctx, t1, 0)
		if err != nil || !equal(seqs(b.Events), []int64{1, 2, 3, 4, 5}) {
			t.Errorf("owner %d: read %v, %v", i, seqs(b.Events), err)
		}
		if conv, turns, err := m.Conversation(ctx, c1); err != nil || conv.Owner != o || len(turns) != 1 {
			t.Errorf("owner %d: conversation %+v %v, %v", i, conv, turns, err)
		}
		// Another owner's ask, with an id of its own home, in this owner's conversation.
		other := owners[(i+1)%len(owners)]
		if _, err := NewTicket(t, m, ID(m, other, "x_"+strconv.Itoa(i)), c2, other, store.Limits{}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("owner %d: another owner's ask in its conversation: %v, want ErrNotFound", i, err)
		}
	}
}

// Ev is an event of type typ at seq, with placeholder data.
func Ev(seq int64, typ gen.EventType) store.Event {
	return store.Event{Seq: seq, Type: typ, Data: []byte(`{"seq":` + strconv.FormatInt(seq, 10) + `}`)}
}

// Tail is a log's end from seq from: branch close, answer, done.
func Tail(from int64) []store.Event {
	return []store.Event{Ev(from, gen.EventTypeBranch), Ev(from+1, gen.EventTypeAnswer), Ev(from+2, gen.EventTypeDone)}
}

// NewTicket registers ticket id in conv for owner, with its accepted event.
func NewTicket(t *testing.T, s store.Store, id, conv string, owner store.Owner, limits store.Limits) ([]ask.Turn, error) {
	t.Helper()
	return s.CreateTicket(t.Context(), store.NewTicket{ID: id, ConversationID: conv, Owner: owner,
		CreatedAt: time.Unix(1700000000, 0).UTC(), Accepted: Ev(1, gen.EventTypeAccepted)}, limits)
}

// MustConv registers conversation id for owner.
func MustConv(t *testing.T, s store.Store, id string, owner store.Owner) {
	t.Helper()
	if err := s.CreateConversation(t.Context(), store.Conversation{ID: id, Owner: owner, CreatedAt: time.Unix(1700000000, 0).UTC()}, store.Limits{}); err != nil {
		t.Fatal(err)
	}
}

// Global is a store-wide cap of n as a test passes it to s, so that the store enforces n on
// the ids the tests use. A store that spreads its keys over buckets (store/redis on Redis
// Cluster: Buckets() > 1) enforces a store-wide cap per bucket, as ceil(cap/buckets), and the
// tests' ids, which carry no home, all live in one bucket: the cap they need is n×buckets.
func Global(s store.Store, n int) int {
	if b, ok := s.(interface{ Buckets() int }); ok && b.Buckets() > 1 {
		return n * b.Buckets()
	}
	return n
}

// Closed fails t unless ch is closed within a bound.
func Closed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(signalWithin):
		t.Fatalf("%s: no change signal", what)
	}
}

func seqs(evs []store.Event) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.Seq)
	}
	return out
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

func testAppendSeqAndEviction(t *testing.T, f Factory) {
	ctx := t.Context()
	m := f(t, Options{MaxEvents: 5})
	MustConv(t, m, "c", Alice)
	if _, err := NewTicket(t, m, "t", "c", Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Append(ctx, "t", Ev(3, gen.EventTypeStep)); !errors.Is(err, store.ErrSeq) {
		t.Errorf("append with a gap: %v, want ErrSeq", err)
	}
	if err := m.Append(ctx, "t", Ev(1, gen.EventTypeStep)); !errors.Is(err, store.ErrSeq) {
		t.Errorf("append of a duplicate: %v, want ErrSeq", err)
	}
	if err := m.Append(ctx, "nope", Ev(2, gen.EventTypeStep)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("append to an unknown ticket: %v, want ErrNotFound", err)
	}
	// seq 2..9: milestone, step, step, milestone, step, step, step, milestone
	types := []gen.EventType{"milestone", "step", "step", "milestone", "step", "step", "step", "milestone"}
	for i, typ := range types {
		if err := m.Append(ctx, "t", Ev(int64(i+2), typ)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := m.Read(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	// The four oldest steps went; accepted and every milestone stayed.
	if got, want := seqs(b.Events), []int64{1, 2, 5, 8, 9}; !equal(got, want) {
		t.Errorf("retained %v, want %v", got, want)
	}
	for _, e := range b.Events {
		if want := `{"seq":` + strconv.FormatInt(e.Seq, 10) + `}`; string(e.Data) != want {
			t.Errorf("seq %d data %q, want %q", e.Seq, e.Data, want)
		}
	}
	tk, _ := m.Ticket(ctx, "t")
	if tk.LastSeq != 9 || tk.Finished() || tk.State() != gen.AskStateRunning || tk.Owner != Alice || tk.ConversationID != "c" {
		t.Errorf("ticket %+v", tk)
	}
	if b, _ := m.Read(ctx, "t", 5); len(b.Events) != 2 || b.Events[0].Seq != 8 {
		t.Errorf("read after 5: %v", seqs(b.Events))
	}
	if _, err := m.Read(ctx, "nope", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("read of an unknown ticket: %v, want ErrNotFound", err)
	}
}

func testReadChangedAndFinish(t *testing.T, f Factory) {
	ctx := t.Context()
	m := f(t, Options{})
	MustConv(t, m, "c", Alice)
	if _, err := NewTicket(t, m, "t", "c", Alice, store.Limits{}); err != nil {
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
	_ = m.Append(ctx, "t", Ev(2, gen.EventTypeBranch))
	Closed(t, b.Changed, "append")
	b, _ = m.Read(ctx, "t", 2)
	if err := m.Finish(ctx, "t", []store.Event{Ev(3, gen.EventTypeBranch), Ev(4, gen.EventTypeBranch)}, ask.Turn{}); !errors.Is(err, store.ErrSeq) {
		t.Errorf("finish without terminal and done: %v", err)
	}
	if err := m.Finish(ctx, "t", Tail(4), ask.Turn{}); !errors.Is(err, store.ErrSeq) {
		t.Errorf("finish with a gap: %v", err)
	}
	if err := m.Finish(ctx, "t", Tail(3), ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer, Text: "a"}); err != nil {
		t.Fatal(err)
	}
	Closed(t, b.Changed, "finish")
	if err := m.Finish(ctx, "t", Tail(6), ask.Turn{}); !errors.Is(err, store.ErrFinished) {
		t.Errorf("second finish: %v", err)
	}
	if err := m.Append(ctx, "t", Ev(6, gen.EventTypeStep)); !errors.Is(err, store.ErrFinished) {
		t.Errorf("append after finish: %v", err)
	}
	b, _ = m.Read(ctx, "t", 0)
	if !b.Finished || b.Changed != nil || len(b.Events) != 5 {
		t.Errorf("read after finish: %+v", b)
	}
	tk, _ := m.Ticket(ctx, "t")
	if tk.State() != gen.AskStateAnswer || tk.Terminal.Seq != 4 || tk.Done.Seq != 5 || string(tk.Done.Data) != `{"seq":5}` {
		t.Errorf("finished ticket %+v", tk)
	}
	_, turns, _ := m.Conversation(ctx, "c")
	if len(turns) != 1 || turns[0] != (ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer, Text: "a"}) {
		t.Errorf("turns %+v", turns)
	}
}

func testAdmission(t *testing.T, f Factory) {
	ctx := t.Context()
	m := f(t, Options{})
	for _, c := range []string{"c1", "c2", "c3"} {
		MustConv(t, m, c, Alice)
	}
	MustConv(t, m, "b1", Bob)
	limits := store.Limits{MaxInFlightPerOwner: 2, MaxTickets: Global(m, 3)}
	if _, err := NewTicket(t, m, "nope", "missing", Alice, limits); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown conversation: %v", err)
	}
	if _, err := NewTicket(t, m, "t1", "c1", Alice, limits); err != nil {
		t.Fatal(err)
	}
	_, err := NewTicket(t, m, "t2", "c1", Alice, limits)
	var conflict *store.ConflictError
	if !errors.As(err, &conflict) || conflict.Ticket != "t1" || !errors.Is(err, store.ErrConflict) {
		t.Errorf("second ask in c1: %v", err)
	}
	if _, err := NewTicket(t, m, "t2", "c2", Alice, limits); err != nil {
		t.Fatal(err)
	}
	if _, err := NewTicket(t, m, "t3", "c3", Alice, limits); !errors.Is(err, store.ErrTooManyInFlight) {
		t.Errorf("third in flight: %v", err)
	}
	if _, err := NewTicket(t, m, "t3", "b1", Bob, limits); err != nil {
		t.Fatal(err)
	}
	_ = m.Finish(ctx, "t1", Tail(2), ask.Turn{})
	if _, err := NewTicket(t, m, "t4", "c3", Alice, limits); !errors.Is(err, store.ErrFull) {
		t.Errorf("over the ticket cap: %v", err)
	}
	if _, err := m.Ticket(ctx, "t4"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused ticket exists: %v", err)
	}
	if _, err := NewTicket(t, m, "t4", "c1", Alice, store.Limits{MaxInFlightPerOwner: 2}); err != nil {
		t.Errorf("a slot freed by finish was not given back: %v", err)
	}
	if err := m.CreateConversation(ctx, store.Conversation{ID: "c4"}, store.Limits{MaxTickets: Global(m, 4)}); !errors.Is(err, store.ErrFull) {
		t.Errorf("over the conversation cap: %v", err)
	}
}

func testConversationTurns(t *testing.T, f Factory) {
	ctx := t.Context()
	m := f(t, Options{})
	created := time.Unix(1700000000, 0).UTC()
	if err := m.CreateConversation(ctx, store.Conversation{ID: "c", Owner: Bob, CreatedAt: created}, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Conversation(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown conversation: %v", err)
	}
	want := []ask.Turn{
		{Question: "How many?\n\"quoted\" ünïcode", Outcome: gen.EventTypeAnswer, Text: "42"},
		{Question: "And then?", Outcome: gen.EventTypeError, Text: "error (timeout): late"},
	}
	for i, turn := range want {
		id := "t" + strconv.Itoa(i)
		history, err := NewTicket(t, m, id, "c", Bob, store.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if len(history) != i {
			t.Errorf("ask %d got %d turns of history", i, len(history))
		}
		if err := m.Finish(ctx, id, Tail(2), turn); err != nil {
			t.Fatal(err)
		}
	}
	// The zero turn records none, and frees the conversation like any end.
	if _, err := NewTicket(t, m, "unrun", "c", Bob, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Finish(ctx, "unrun", Tail(2), ask.Turn{}); err != nil {
		t.Fatal(err)
	}
	if history, err := NewTicket(t, m, "after", "c", Bob, store.Limits{}); err != nil || len(history) != len(want) {
		t.Errorf("the ask after one ended with the zero turn: %d turns of history (%v), want %d", len(history), err, len(want))
	}
	c, turns, err := m.Conversation(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != "c" || c.Owner != Bob || !c.CreatedAt.Equal(created) {
		t.Errorf("conversation %+v", c)
	}
	if len(turns) != len(want) {
		t.Fatalf("turns %+v, want %+v", turns, want)
	}
	for i := range want {
		if turns[i] != want[i] {
			t.Errorf("turn %d: %+v, want %+v", i, turns[i], want[i])
		}
	}
}

// testConcurrentReaders: readers following the log from every cursor while it is written see
// every seq after their cursor exactly once, in order (no step is evicted here).
func testConcurrentReaders(t *testing.T, f Factory) {
	ctx := t.Context()
	const n = 300
	m := f(t, Options{MaxEvents: n + 10})
	MustConv(t, m, "c", Alice)
	if _, err := NewTicket(t, m, "t", "c", Alice, store.Limits{}); err != nil {
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
			select {
			case <-b.Changed:
			case <-time.After(signalWithin):
				return errors.New("no change signal after " + strconv.FormatInt(after, 10))
			}
		}
	}
	errs := make(chan error, 40)
	for i := range 40 {
		go func() { errs <- follow(int64(i * 7 % 50)) }()
	}
	for seq := int64(2); seq <= n; seq++ {
		if err := m.Append(ctx, "t", Ev(seq, gen.EventTypeMilestone)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Finish(ctx, "t", Tail(n+1), ask.Turn{}); err != nil {
		t.Fatal(err)
	}
	for range 40 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// conv registers conversation id for owner under limits.
func conv(t *testing.T, s store.Store, id string, owner store.Owner, limits store.Limits) error {
	t.Helper()
	return s.CreateConversation(t.Context(), store.Conversation{ID: id, Owner: owner, CreatedAt: time.Unix(1700000000, 0).UTC()}, limits)
}

// notCreated fails t if ticket exists, or if conversation c is marked running (a refused ask
// left half-created): an ask in c with no limits must be admitted.
func notCreated(t *testing.T, s store.Store, ticket, c string, owner store.Owner) {
	t.Helper()
	if _, err := s.Ticket(t.Context(), ticket); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused ticket %s exists: %v", ticket, err)
	}
	if _, err := s.Read(t.Context(), ticket, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused ticket %s has a log: %v", ticket, err)
	}
	if _, err := NewTicket(t, s, ticket+"-after", c, owner, store.Limits{}); err != nil {
		t.Errorf("conversation %s after a refused ask: %v", c, err)
	}
}

// testConversationsPerOwner: one owner at its cap is refused with ErrOwnerFull (a HeldError
// saying when the first of its idle conversations is due to expire), before the shared cap,
// creating nothing; another owner is not affected.
func testConversationsPerOwner(t *testing.T, f Factory) {
	ctx := t.Context()
	m := f(t, Options{})
	limits := store.Limits{MaxConversationsPerOwner: 2, MaxTickets: Global(m, 10)}
	for _, id := range []string{"a1", "a2"} {
		if err := conv(t, m, id, Alice, limits); err != nil {
			t.Fatal(err)
		}
	}
	err := conv(t, m, "a3", Alice, limits)
	if !errors.Is(err, store.ErrOwnerFull) {
		t.Errorf("alice's third conversation: %v, want ErrOwnerFull", err)
	}
	// Both are idle: the refusal says when the first is due to expire.
	if held := (*store.HeldError)(nil); !errors.As(err, &held) || held.Frees <= 0 {
		t.Errorf("alice's third conversation with two idle: %v, want a HeldError with when one frees", err)
	}
	if _, _, err := m.Conversation(ctx, "a3"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused conversation exists: %v", err)
	}
	if err := conv(t, m, "b1", Bob, limits); err != nil {
		t.Errorf("bob while alice is at her cap: %v", err)
	}
	// The per-owner cap answers before the shared one: alice is told it is hers that is full.
	if err := conv(t, m, "a3", Alice, store.Limits{MaxConversationsPerOwner: 2, MaxTickets: Global(m, 3)}); !errors.Is(err, store.ErrOwnerFull) {
		t.Errorf("alice at both caps: %v, want ErrOwnerFull", err)
	}
	if err := conv(t, m, "b2", Bob, store.Limits{MaxConversationsPerOwner: 2, MaxTickets: Global(m, 3)}); !errors.Is(err, store.ErrFull) {
		t.Errorf("bob under his cap, the store at its: %v, want ErrFull", err)
	}
	// Asking in a conversation (its ask running, then ended) does not count it twice.
	if _, err := NewTicket(t, m, "t1", "a1", Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := conv(t, m, "a3", Alice, limits); !errors.Is(err, store.ErrOwnerFull) {
		t.Errorf("alice's third conversation while one runs: %v, want ErrOwnerFull", err)
	}
	if err := m.Finish(ctx, "t1", Tail(2), ask.Turn{}); err != nil {
		t.Fatal(err)
	}
	if err := conv(t, m, "a3", Alice, store.Limits{MaxConversationsPerOwner: 3}); err != nil {
		t.Errorf("alice's third conversation under a cap of three: %v", err)
	}
}

// testDropConversation: a store's DropConversation (store.ConversationDropper) removes a
// conversation as created, and only that, releasing its place under the owner's cap; on a
// shared store, a creation of it that arrives after the drop makes nothing; one in use (an ask
// running, or a turn) is left, ErrConflict.
func testDropConversation(t *testing.T, f Factory) {
	ctx := t.Context()
	m := f(t, Options{})
	sh, ok := m.(store.ConversationDropper)
	if !ok {
		t.Skip("the store drops no conversation")
	}
	_, shared := m.(store.Shared)
	at := time.Unix(1700000000, 0).UTC()
	c := func(id string, o store.Owner) store.Conversation {
		return store.Conversation{ID: id, Owner: o, CreatedAt: at}
	}
	limits := store.Limits{MaxConversationsPerOwner: 2, MaxTickets: Global(m, 10)}
	for _, id := range []string{"a1", "a2"} {
		if err := conv(t, m, id, Alice, limits); err != nil {
			t.Fatal(err)
		}
	}
	// Not the owner's, or not created at that time: not the creation to drop.
	for _, other := range []store.Conversation{c("a1", Bob), {ID: "a1", Owner: Alice, CreatedAt: at.Add(time.Nanosecond)}} {
		if dropped, err := sh.DropConversation(ctx, other); dropped || err != nil {
			t.Errorf("drop %+v: %v %v, want false, nil", other, dropped, err)
		}
	}
	if dropped, err := sh.DropConversation(ctx, c("a1", Alice)); !dropped || err != nil {
		t.Fatalf("drop a1: %v %v, want true, nil", dropped, err)
	}
	if _, _, err := m.Conversation(ctx, "a1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a1 after its drop: %v, want ErrNotFound", err)
	}
	if dropped, err := sh.DropConversation(ctx, c("a1", Alice)); dropped || err != nil {
		t.Errorf("the drop re-run: %v %v, want false, nil", dropped, err)
	}
	// Its place under the cap is free.
	if err := conv(t, m, "a3", Alice, limits); err != nil {
		t.Errorf("alice's conversation after a drop under a cap of two: %v", err)
	}
	if dropped, err := sh.DropConversation(ctx, c("a4", Alice)); dropped || err != nil {
		t.Errorf("drop of a conversation never made: %v %v, want false, nil", dropped, err)
	}
	// On a shared store, a creation on its way when the drop came (the same call, retried or
	// late) makes nothing, and so does one that arrives after a drop that found nothing. (No
	// creation is on its way to a store in the process.)
	for _, id := range []string{"a1", "a4"} {
		if !shared {
			continue
		}
		if err := conv(t, m, id, Alice, store.Limits{}); err == nil {
			t.Errorf("%s created after its drop", id)
		}
		if _, _, err := m.Conversation(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s, created after its drop: %v, want ErrNotFound", id, err)
		}
	}
	if err := conv(t, m, "a5", Alice, limits); !errors.Is(err, store.ErrOwnerFull) {
		t.Errorf("alice's third conversation (a2, a3 held): %v, want ErrOwnerFull", err)
	}
	// In use: an ask runs in it, then it holds the ask's turn.
	if _, err := NewTicket(t, m, "t1", "a2", Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if dropped, err := sh.DropConversation(ctx, c("a2", Alice)); dropped || !errors.Is(err, store.ErrConflict) {
		t.Errorf("drop of a conversation an ask runs in: %v %v, want ErrConflict", dropped, err)
	}
	if err := m.Finish(ctx, "t1", Tail(2), ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer, Text: "a"}); err != nil {
		t.Fatal(err)
	}
	if dropped, err := sh.DropConversation(ctx, c("a2", Alice)); dropped || !errors.Is(err, store.ErrConflict) {
		t.Errorf("drop of a conversation with a turn: %v %v, want ErrConflict", dropped, err)
	}
	if _, turns, err := m.Conversation(ctx, "a2"); err != nil || len(turns) != 1 {
		t.Errorf("a2 after the refused drops: %d turns, %v", len(turns), err)
	}
}

// testRetainedPerOwner: an owner's tickets count against its cap while they run and after they
// finish (until their TTL); at the cap an ask is refused with ErrOwnerFull, creating nothing,
// and another owner is not affected.
func testRetainedPerOwner(t *testing.T, f Factory) {
	ctx := t.Context()
	m := f(t, Options{})
	for _, c := range []string{"c1", "c2"} {
		MustConv(t, m, c, Alice)
	}
	MustConv(t, m, "b1", Bob)
	limits := store.Limits{MaxInFlightPerOwner: 5, MaxRetainedPerOwner: 2, MaxTickets: Global(m, 10)}
	if _, err := NewTicket(t, m, "t1", "c1", Alice, limits); err != nil {
		t.Fatal(err)
	}
	if _, err := NewTicket(t, m, "t2", "c2", Alice, limits); err != nil {
		t.Fatal(err)
	}
	_ = m.Finish(ctx, "t1", Tail(2), ask.Turn{})
	_ = m.Finish(ctx, "t2", Tail(2), ask.Turn{})
	_, err := NewTicket(t, m, "t3", "c1", Alice, limits)
	if !errors.Is(err, store.ErrOwnerFull) {
		t.Errorf("alice's third ticket with two retained: %v, want ErrOwnerFull", err)
	}
	// Both are finished: the refusal says when the first is due to expire.
	if held := (*store.HeldError)(nil); !errors.As(err, &held) || held.Frees <= 0 {
		t.Errorf("alice's third ticket with two finished retained: %v, want a HeldError with when one frees", err)
	}
	notCreated(t, m, "t3", "c1", Alice)
	if _, err := NewTicket(t, m, "t4", "b1", Bob, limits); err != nil {
		t.Errorf("bob while alice is at her cap: %v", err)
	}
	// A running ticket counts too; the in-flight cap answers first when both are reached.
	if _, err := NewTicket(t, m, "t5", "c2", Alice, store.Limits{MaxInFlightPerOwner: 1, MaxRetainedPerOwner: 3}); !errors.Is(err, store.ErrTooManyInFlight) {
		t.Errorf("alice at her in-flight cap: %v, want ErrTooManyInFlight", err)
	}
	if _, err := NewTicket(t, m, "t5", "c2", Alice, store.Limits{MaxRetainedPerOwner: 4, MaxTickets: Global(m, 5)}); err != nil {
		t.Fatal(err)
	}
	// The per-owner cap answers before the shared one.
	if _, err := NewTicket(t, m, "t6", "b1", Bob, store.Limits{MaxRetainedPerOwner: 1, MaxTickets: Global(m, 1)}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("bob's second ask in b1 while t4 runs: %v, want a conflict", err)
	}
	_ = m.Finish(ctx, "t4", Tail(2), ask.Turn{})
	if _, err := NewTicket(t, m, "t6", "b1", Bob, store.Limits{MaxRetainedPerOwner: 1, MaxTickets: Global(m, 1)}); !errors.Is(err, store.ErrOwnerFull) {
		t.Errorf("bob at his cap and the store at its: %v, want ErrOwnerFull", err)
	}
	if _, err := NewTicket(t, m, "t6", "b1", Bob, store.Limits{MaxRetainedPerOwner: 2, MaxTickets: Global(m, 1)}); !errors.Is(err, store.ErrFull) {
		t.Errorf("bob under his cap, the store at its: %v, want ErrFull", err)
	}
}

// testMaxTurns: a conversation that holds MaxTurns turns refuses the next ask with
// ErrConversationFull, creating nothing; a running ask is not a turn until it ends.
func testMaxTurns(t *testing.T, f Factory) {
	ctx := t.Context()
	m := f(t, Options{})
	MustConv(t, m, "c", Alice)
	limits := store.Limits{MaxTurns: 2}
	for i := range 2 {
		id := "t" + strconv.Itoa(i)
		if _, err := NewTicket(t, m, id, "c", Alice, limits); err != nil {
			t.Fatalf("ask %d: %v", i, err)
		}
		if err := m.Finish(ctx, id, Tail(2), ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewTicket(t, m, "t2", "c", Alice, limits); !errors.Is(err, store.ErrConversationFull) {
		t.Errorf("a third ask in a conversation of two turns: %v, want ErrConversationFull", err)
	}
	if errors.Is(store.ErrConversationFull, store.ErrConflict) {
		t.Error("ErrConversationFull must not match ErrConflict (it names no running ticket)")
	}
	notCreated(t, m, "t2", "c", Alice) // under no cap the ask is admitted: a third turn, running
	if _, err := NewTicket(t, m, "t3", "c", Alice, limits); !errors.Is(err, store.ErrConflict) {
		t.Errorf("an ask while one runs in a full conversation: %v, want the conflict first", err)
	}
	if _, turns, _ := m.Conversation(ctx, "c"); len(turns) != 2 {
		t.Errorf("%d turns, want 2", len(turns))
	}
}

// testOtherOwnersConversation: a ticket in another owner's conversation is refused as if the
// conversation did not exist.
func testOtherOwnersConversation(t *testing.T, f Factory) {
	m := f(t, Options{})
	MustConv(t, m, "c", Alice)
	if _, err := NewTicket(t, m, "t", "c", Bob, store.Limits{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("bob's ask in alice's conversation: %v, want ErrNotFound", err)
	}
	if _, err := NewTicket(t, m, "t", "c", store.Owner{Tenant: "u", OID: "alice"}, store.Limits{}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant's alice in alice's conversation: %v, want ErrNotFound", err)
	}
	notCreated(t, m, "t", "c", Alice)
}

// testRetriedWrites: every write re-run with the same arguments (a retry after a lost reply)
// answers as the first run did and changes nothing; the same seq with another event, or
// another end, is still refused.
func testRetriedWrites(t *testing.T, f Factory) {
	ctx := t.Context()
	m := f(t, Options{})
	limits := store.Limits{MaxConversationsPerOwner: 1, MaxInFlightPerOwner: 1, MaxRetainedPerOwner: 1, MaxTickets: Global(m, 1)}
	c := store.Conversation{ID: "c", Owner: Alice, CreatedAt: time.Unix(1700000000, 0).UTC()}
	for i := range 2 {
		if err := m.CreateConversation(ctx, c, limits); err != nil {
			t.Fatalf("CreateConversation, run %d: %v (at the caps only with itself)", i+1, err)
		}
	}
	if err := m.CreateConversation(ctx, store.Conversation{ID: "c", Owner: Bob, CreatedAt: c.CreatedAt}, store.Limits{}); err == nil {
		t.Error("CreateConversation of another's id answered ok")
	}
	for i := range 2 {
		turns, err := NewTicket(t, m, "t", "c", Alice, limits)
		if err != nil || len(turns) != 0 {
			t.Fatalf("CreateTicket, run %d: %v, %v; want the ticket it created", i+1, turns, err)
		}
	}
	if _, err := m.CreateTicket(ctx, store.NewTicket{ID: "t", ConversationID: "c", Owner: Alice,
		CreatedAt: time.Unix(1700000001, 0).UTC(), Accepted: Ev(1, gen.EventTypeAccepted)}, store.Limits{}); err == nil {
		t.Error("CreateTicket of another ticket under a taken id answered ok")
	}
	for i := range 2 {
		if err := m.Append(ctx, "t", Ev(2, gen.EventTypeStep)); err != nil {
			t.Fatalf("Append, run %d: %v", i+1, err)
		}
	}
	other := Ev(2, gen.EventTypeStep)
	other.Data = []byte(`{"other":2}`)
	if err := m.Append(ctx, "t", other); !errors.Is(err, store.ErrSeq) {
		t.Errorf("another event at a taken seq: %v, want ErrSeq", err)
	}
	turn := ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer, Text: "a"}
	for i := range 2 {
		if err := m.Finish(ctx, "t", Tail(3), turn); err != nil {
			t.Fatalf("Finish, run %d: %v", i+1, err)
		}
	}
	otherTail := Tail(3)
	otherTail[2].Data = []byte(`{"other":5}`)
	if err := m.Finish(ctx, "t", otherTail, turn); !errors.Is(err, store.ErrFinished) {
		t.Errorf("another end: %v, want ErrFinished", err)
	}
	b, err := m.Read(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := seqs(b.Events), []int64{1, 2, 3, 4, 5}; !equal(got, want) || !b.Finished {
		t.Errorf("log after retries %v (finished %v), want %v, finished", got, b.Finished, want)
	}
	_, turns, err := m.Conversation(ctx, "c")
	if err != nil || len(turns) != 1 {
		t.Errorf("turns after a retried Finish: %v, %v; want one", turns, err)
	}
}
