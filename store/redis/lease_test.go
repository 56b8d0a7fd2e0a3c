package redis_test

import (
	"errors"
	"slices"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/storetest"
)

func interruptedTail(from int64) []store.Event {
	return []store.Event{storetest.Ev(from, gen.EventTypeBranch), storetest.Ev(from+1, gen.EventTypeError), storetest.Ev(from+2, gen.EventTypeDone)}
}

// TestLapsedLeaseEndsOnce: while the runner's lease is live nobody else may end the run for a
// lapse; once it lapsed (forced here, as the lease's clock is Redis's), of many replicas
// ending it at the same moment exactly one succeeds, and the runner coming back is fenced off.
func TestLapsedLeaseEndsOnce(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	ctx := t.Context()
	const prefix = "lease:"
	runner := newStore(t, srv, redisstore.Options{Prefix: prefix, Replica: "runner"})
	storetest.MustConv(t, runner, "c", storetest.Alice)
	limits := store.Limits{MaxInFlightPerOwner: 1}
	if _, err := storetest.NewTicket(t, runner, "t", "c", storetest.Alice, limits); err != nil {
		t.Fatal(err)
	}
	if err := runner.Append(ctx, "t", storetest.Ev(2, gen.EventTypeStep)); err != nil {
		t.Fatal(err)
	}
	if err := runner.Renew(ctx, "t", store.Usage{ModelCalls: 2, InputTokens: 30, OutputTokens: 4}); err != nil {
		t.Fatal(err)
	}
	if u, err := runner.Usage(ctx, "t"); err != nil || u != (store.Usage{Steps: 1, ModelCalls: 2, InputTokens: 30, OutputTokens: 4}) {
		t.Errorf("usage %+v, %v", u, err)
	}
	others := make([]*redisstore.Store, 4)
	for i := range others {
		others[i] = newStore(t, srv, redisstore.Options{Prefix: prefix})
	}
	if ids, _ := others[0].Lapsed(ctx, 10); len(ids) != 0 {
		t.Errorf("lapsed while the lease is live: %v", ids)
	}
	if err := others[0].End(ctx, "t", interruptedTail(3), ask.Turn{}, true); !errors.Is(err, store.ErrLeaseHeld) {
		t.Errorf("end of a held lease: %v, want ErrLeaseHeld", err)
	}

	rc.ZAdd(ctx, k0(prefix, "running"), goredis.Z{Score: 1, Member: "t"}) // the lease lapses
	if ids, _ := others[1].Lapsed(ctx, 10); len(ids) != 1 || ids[0] != "t" {
		t.Fatalf("lapsed: %v, want [t]", ids)
	}
	if err := others[0].End(ctx, "t", interruptedTail(2), ask.Turn{}, true); !errors.Is(err, store.ErrSeq) {
		t.Errorf("end that does not continue the log: %v, want ErrSeq", err)
	}
	var wg sync.WaitGroup
	results := make([]error, len(others))
	for i, o := range others {
		wg.Go(func() {
			results[i] = o.End(ctx, "t", interruptedTail(3), ask.Turn{Question: "q", Outcome: gen.EventTypeError, Text: "interrupted"}, true)
		})
	}
	wg.Wait()
	won := 0
	for _, err := range results {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrFinished):
			t.Errorf("a losing end: %v, want ErrFinished", err)
		}
	}
	if won != 1 {
		t.Errorf("%d replicas ended the run, want exactly 1", won)
	}
	// The old runner comes back.
	if err := runner.Append(ctx, "t", storetest.Ev(6, gen.EventTypeStep)); !errors.Is(err, store.ErrFinished) {
		t.Errorf("append by the old runner: %v, want ErrFinished", err)
	}
	if err := runner.Renew(ctx, "t", store.Usage{}); !errors.Is(err, store.ErrFinished) {
		t.Errorf("renew by the old runner: %v, want ErrFinished", err)
	}
	if err := runner.Finish(ctx, "t", storetest.Tail(6), ask.Turn{}); !errors.Is(err, store.ErrFinished) {
		t.Errorf("finish by the old runner: %v, want ErrFinished", err)
	}
	b, _ := runner.Read(ctx, "t", 0)
	var types []gen.EventType
	for _, e := range b.Events {
		types = append(types, e.Type)
	}
	if want := []gen.EventType{"accepted", "step", "branch", "error", "done"}; !b.Finished || len(types) != len(want) || types[3] != "error" || types[4] != "done" {
		t.Errorf("log %v (finished %v), want %v", types, b.Finished, want)
	}
	_, turns, _ := runner.Conversation(ctx, "c")
	if len(turns) != 1 || turns[0].Text != "interrupted" {
		t.Errorf("turns %+v, want the one interrupted turn", turns)
	}
	if ids, _ := others[0].Lapsed(ctx, 10); len(ids) != 0 {
		t.Errorf("still lapsed after the end: %v", ids)
	}
	// The owner's in-flight slot and the conversation are free again.
	if _, err := storetest.NewTicket(t, others[0], "t2", "c", storetest.Alice, limits); err != nil {
		t.Errorf("a new ask after the interrupted one: %v", err)
	}
}

// TestEndByCancel: End without lapsedOnly ends a running ticket at once (a cancel that reached
// another replica), even though its lease is live.
func TestEndByCancel(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	runner := newStore(t, srv, redisstore.Options{Prefix: "cancel:", Replica: "runner"})
	other := newStore(t, srv, redisstore.Options{Prefix: "cancel:"})
	storetest.MustConv(t, runner, "c", storetest.Alice)
	if _, err := storetest.NewTicket(t, runner, "t", "c", storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	watch, _ := runner.Read(ctx, "t", 1)
	if err := other.End(ctx, "t", interruptedTail(2), ask.Turn{}, false); err != nil {
		t.Fatal(err)
	}
	storetest.Closed(t, watch.Changed, "end on another replica")
	if b, _ := runner.Read(ctx, "t", 1); !b.Finished || len(b.Events) != 3 {
		t.Errorf("the runner reads %+v, want the finished tail", b)
	}
	if err := other.End(ctx, "t", interruptedTail(5), ask.Turn{}, false); !errors.Is(err, store.ErrFinished) {
		t.Errorf("second end: %v, want ErrFinished", err)
	}
	if err := other.End(ctx, "missing", interruptedTail(2), ask.Turn{}, false); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("end of an unknown ticket: %v, want ErrNotFound", err)
	}
}

// TestLapsedDropsGoneTickets: a running-set entry whose ticket no longer exists is dropped,
// not reported.
func TestLapsedDropsGoneTickets(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	ctx := t.Context()
	s := newStore(t, srv, redisstore.Options{Prefix: "ghost:"})
	rc.ZAdd(ctx, k0("ghost:", "running"), goredis.Z{Score: 1, Member: "gone"})
	if ids, err := s.Lapsed(ctx, 10); err != nil || len(ids) != 0 {
		t.Errorf("lapsed: %v, %v; want none", ids, err)
	}
	if n := rc.ZCard(ctx, k0("ghost:", "running")).Val(); n != 0 {
		t.Errorf("%d entries left in the running set, want 0", n)
	}
}

// TestEndStopsABusyLog: an End that lost the race with the runner's append fails with ErrSeq
// but stops the log, so the runner is refused from then on and the retry succeeds.
func TestEndStopsABusyLog(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	runner := newStore(t, srv, redisstore.Options{Prefix: "busy:", Replica: "runner"})
	other := newStore(t, srv, redisstore.Options{Prefix: "busy:"})
	storetest.MustConv(t, runner, "c", storetest.Alice)
	if _, err := storetest.NewTicket(t, runner, "t", "c", storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	stale := interruptedTail(2) // built before the runner's next append
	if err := runner.Append(ctx, "t", storetest.Ev(2, gen.EventTypeStep)); err != nil {
		t.Fatal(err)
	}
	if err := other.End(ctx, "t", stale, ask.Turn{}, false); !errors.Is(err, store.ErrSeq) {
		t.Fatalf("end with a stale tail: %v, want ErrSeq", err)
	}
	if err := runner.Append(ctx, "t", storetest.Ev(3, gen.EventTypeStep)); !errors.Is(err, store.ErrFinished) {
		t.Errorf("append after a lost end: %v, want ErrFinished (the log is ending)", err)
	}
	if err := runner.Renew(ctx, "t", store.Usage{}); !errors.Is(err, store.ErrFinished) {
		t.Errorf("renew after a lost end: %v, want ErrFinished", err)
	}
	if err := runner.Finish(ctx, "t", storetest.Tail(3), ask.Turn{}); !errors.Is(err, store.ErrFinished) {
		t.Errorf("the runner's own finish after a lost end: %v, want ErrFinished", err)
	}
	if err := other.End(ctx, "t", interruptedTail(3), ask.Turn{}, false); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	tk, _ := other.Ticket(ctx, "t")
	if tk.State() != gen.AskStateError || tk.LastSeq != 5 {
		t.Errorf("ticket %+v, want error with last seq 5", tk)
	}
}

// TestFloorPutsAnEndFromElsewhereAfterIt: a running ticket's floor (seqs readers were given that
// the store lost) is raised only past the log's last seq and the floor already there; an end
// from another replica must come after it (an end at the log's last seq is ErrSeq), and leaves
// the seqs between a gap; the runner's own end is not moved by it; a finished or gone ticket
// takes no floor.
func TestFloorPutsAnEndFromElsewhereAfterIt(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	const prefix = "floor:"
	runner := newStore(t, srv, redisstore.Options{Prefix: prefix, Replica: "runner"})
	other := newStore(t, srv, redisstore.Options{Prefix: prefix})
	storetest.MustConv(t, runner, "c", storetest.Alice)
	storetest.MustConv(t, runner, "c2", storetest.Alice)
	for id, cid := range map[string]string{"t": "c", "t2": "c2"} {
		if _, err := storetest.NewTicket(t, runner, id, cid, storetest.Alice, store.Limits{}); err != nil {
			t.Fatal(err)
		}
		if err := runner.Append(ctx, id, storetest.Ev(2, gen.EventTypeStep)); err != nil {
			t.Fatal(err)
		}
	}
	floor := func(id string) int64 {
		t.Helper()
		tk, err := other.Ticket(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return tk.Floor
	}
	for _, c := range []struct {
		seq, want int64
	}{{2, 0}, {6, 6}, {4, 6}, {7, 7}} {
		if err := other.RaiseFloor(ctx, "t", c.seq); err != nil {
			t.Fatalf("raise to %d: %v", c.seq, err)
		}
		if got := floor("t"); got != c.want {
			t.Errorf("floor after a raise to %d: %d, want %d", c.seq, got, c.want)
		}
	}
	if err := other.End(ctx, "t", interruptedTail(3), ask.Turn{}, false); !errors.Is(err, store.ErrSeq) {
		t.Errorf("an end after the last seq, below the floor: %v, want ErrSeq", err)
	}
	if err := other.End(ctx, "t", interruptedTail(8), ask.Turn{}, false); err != nil {
		t.Fatalf("an end after the floor: %v", err)
	}
	b, err := other.Read(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, e := range b.Events {
		seqs = append(seqs, e.Seq)
	}
	if want := []int64{1, 2, 8, 9, 10}; !b.Finished || !slices.Equal(seqs, want) {
		t.Errorf("log seqs %v (finished %v), want %v", seqs, b.Finished, want)
	}
	if err := other.RaiseFloor(ctx, "t", 20); !errors.Is(err, store.ErrFinished) {
		t.Errorf("a raise on a finished ticket: %v, want ErrFinished", err)
	}
	if err := other.RaiseFloor(ctx, "gone", 20); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a raise on a ticket that is not there: %v, want ErrNotFound", err)
	}

	// The runner's own end continues its own seqs, whatever the floor.
	if err := other.RaiseFloor(ctx, "t2", 5); err != nil {
		t.Fatal(err)
	}
	if err := runner.Finish(ctx, "t2", storetest.Tail(3), ask.Turn{}); err != nil {
		t.Fatalf("the runner's own end below the floor: %v", err)
	}
}
