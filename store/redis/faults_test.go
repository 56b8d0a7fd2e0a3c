package redis_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/faultproxy"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/storetest"
)

// behindProxy opens a store whose every connection to srv passes through a fault proxy, with
// a short read timeout so that a stalled reply costs the test little.
func behindProxy(t *testing.T, srv *redistest.Server, o redisstore.Options) (*redisstore.Store, *faultproxy.Proxy) {
	t.Helper()
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	rc := goredis.NewClient(&goredis.Options{Addr: p.Addr(), ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	t.Cleanup(func() { _ = rc.Close() })
	if o.Prefix == "" {
		o.Prefix = "fault:" + rand.Text() + ":"
	}
	o.Client = rc
	s, err := redisstore.New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, p
}

func dropped(t *testing.T, p *faultproxy.Proxy, want int64) {
	t.Helper()
	if got := p.Stats().RepliesDropped; got != want {
		t.Fatalf("the proxy dropped %d replies, want %d: the fault under test did not fire", got, want)
	}
}

// Each write, its reply lost once (go-redis reconnects and runs it again), answers as if the
// reply had arrived, and the store holds its effect once.
func TestLostRepliesAreIdempotent(t *testing.T) {
	srv := redistest.Start(t)
	for _, then := range []faultproxy.Then{faultproxy.Close, faultproxy.Stall} {
		t.Run(then.String(), func(t *testing.T) {
			ctx := t.Context()
			s, p := behindProxy(t, srv, redisstore.Options{})
			limits := store.Limits{MaxConversationsPerOwner: 1, MaxInFlightPerOwner: 1, MaxRetainedPerOwner: 1}

			p.DropReplies(1, "conv-lost", then)
			if err := s.CreateConversation(ctx, store.Conversation{ID: "conv-lost", Owner: storetest.Alice, CreatedAt: time.Unix(1700000000, 0)}, limits); err != nil {
				t.Fatalf("CreateConversation through a lost reply: %v (at the per-owner cap of 1 only with itself)", err)
			}
			dropped(t, p, 1)

			p.DropReplies(1, "accepted-lost", then)
			turns, err := s.CreateTicket(ctx, store.NewTicket{ID: "t1", ConversationID: "conv-lost", Owner: storetest.Alice,
				CreatedAt: time.Unix(1700000000, 0), Accepted: store.Event{Seq: 1, Type: gen.EventTypeAccepted, Data: []byte(`"accepted-lost"`)}}, limits)
			if err != nil || len(turns) != 0 {
				t.Fatalf("CreateTicket through a lost reply: %v, %v; want the ticket it created, not a conflict naming it", turns, err)
			}
			dropped(t, p, 2)

			p.DropReplies(1, `step-lost`, then)
			if err := s.Append(ctx, "t1", store.Event{Seq: 2, Type: gen.EventTypeStep, Data: []byte(`"step-lost"`)}); err != nil {
				t.Fatalf("Append through a lost reply: %v, want ok (the same event at the same seq by the same runner)", err)
			}
			dropped(t, p, 3)

			p.DropReplies(1, "t1", then)
			if err := s.Renew(ctx, "t1", store.Usage{ModelCalls: 1}); err != nil {
				t.Fatalf("Renew through a lost reply: %v", err)
			}
			dropped(t, p, 4)

			tail := storetest.Tail(3)
			tail[2].Data = []byte(`"done-lost"`)
			p.DropReplies(1, "done-lost", then)
			if err := s.Finish(ctx, "t1", tail, ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer, Text: "a"}); err != nil {
				t.Fatalf("Finish through a lost reply: %v, want ok (the end it wrote)", err)
			}
			dropped(t, p, 5)

			b, err := s.Read(ctx, "t1", 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []int64
			for _, ev := range b.Events {
				got = append(got, ev.Seq)
			}
			if len(got) != 5 || got[0] != 1 || got[4] != 5 || !b.Finished {
				t.Errorf("log %v (finished %v), want 1..5 once each, finished", got, b.Finished)
			}
			if _, turns, _ := s.Conversation(ctx, "conv-lost"); len(turns) != 1 {
				t.Errorf("%d turns, want 1", len(turns))
			}
		})
	}
}

// A cancel (End from another replica) whose reply is lost, retried by the service: ok, once.
func TestLostReplyToEnd(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	prefix := "end:" + rand.Text() + ":"
	runner := newStore(t, srv, redisstore.Options{Prefix: prefix})
	other, p := behindProxy(t, srv, redisstore.Options{Prefix: prefix})
	storetest.MustConv(t, runner, "c", storetest.Alice)
	if _, err := storetest.NewTicket(t, runner, "t", "c", storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	tail := interruptedTail(2)
	tail[2].Data = []byte(`"done-lost"`)
	p.DropReplies(1, "done-lost", faultproxy.Close)
	if err := other.End(ctx, "t", tail, ask.Turn{}, false); err != nil {
		t.Fatalf("End through a lost reply: %v, want ok", err)
	}
	dropped(t, p, 1)
	if err := runner.End(ctx, "t", tail, ask.Turn{}, false); !errors.Is(err, store.ErrFinished) {
		t.Errorf("the same end from another instance: %v, want ErrFinished (only its writer's retry is ok)", err)
	}
	if err := runner.Append(ctx, "t", storetest.Ev(5, gen.EventTypeStep)); !errors.Is(err, store.ErrFinished) {
		t.Errorf("the runner's append after the end: %v, want ErrFinished", err)
	}
}

// Connections reset under the store: the next call reconnects and succeeds.
func TestResetConnections(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	s, p := behindProxy(t, srv, redisstore.Options{})
	storetest.MustConv(t, s, "c", storetest.Alice)
	if _, err := storetest.NewTicket(t, s, "t", "c", storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	for seq := int64(2); seq < 6; seq++ {
		p.ResetAll()
		if err := s.Append(ctx, "t", storetest.Ev(seq, gen.EventTypeStep)); err != nil {
			t.Fatalf("append %d after a reset: %v", seq, err)
		}
	}
	if p.Stats().Resets == 0 {
		t.Fatal("no connection was reset")
	}
	if tk, err := s.Ticket(ctx, "t"); err != nil || tk.LastSeq != 5 {
		t.Errorf("ticket %+v, %v; want last seq 5", tk, err)
	}
}

// A store that cannot be reached answers store.ErrUnavailable (503 at the edge), and the
// caller's own cancellation is not that.
func TestUnreachableIsUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	s, p := behindProxy(t, srv, redisstore.Options{})
	storetest.MustConv(t, s, "c", storetest.Alice)
	p.Refuse()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := s.Ticket(ctx, "t"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ticket with Redis unreachable: %v, want ErrUnavailable", err)
	}
	if _, _, err := s.Conversation(ctx, "c"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Conversation with Redis unreachable: %v, want ErrUnavailable", err)
	}
	if err := s.Append(ctx, "t", storetest.Ev(2, gen.EventTypeStep)); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Append with Redis unreachable: %v, want ErrUnavailable", err)
	}
	p.Stall()
	gone, stop := context.WithCancel(t.Context())
	stop()
	if _, err := s.Ticket(gone, "t"); err == nil || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ticket for a caller that went away: %v, want its cancellation, not ErrUnavailable", err)
	}
	p.Pass()
	if _, _, err := s.Conversation(ctx, "c"); err != nil {
		t.Errorf("Conversation once Redis is back: %v", err)
	}
}

// Restore: the store lost a running ticket's last writes, or the whole ticket (a restart).
// The runner re-creates it if needed and ends it after every seq it assigned; the lost events
// leave a gap, the ticket does not vanish, and the conversation is free again.
func TestRestore(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	rc := raw(t, srv)
	prefix := "restore:" + rand.Text() + ":"
	s := newStore(t, srv, redisstore.Options{Prefix: prefix})
	other := newStore(t, srv, redisstore.Options{Prefix: prefix})
	nt := func(id string) store.NewTicket {
		return store.NewTicket{ID: id, ConversationID: "c", Owner: storetest.Alice, CreatedAt: time.Unix(1700000000, 0),
			Accepted: storetest.Ev(1, gen.EventTypeAccepted)}
	}
	storetest.MustConv(t, s, "c", storetest.Alice)
	if _, err := s.CreateTicket(ctx, nt("t1"), store.Limits{}); err != nil {
		t.Fatal(err)
	}
	for seq := int64(2); seq <= 3; seq++ {
		if err := s.Append(ctx, "t1", storetest.Ev(seq, gen.EventTypeStep)); err != nil {
			t.Fatal(err)
		}
	}
	turn := ask.Turn{Question: "q", Outcome: gen.EventTypeError, Text: "interrupted"}
	// The runner had assigned up to seq 5; the store kept 3.
	if err := other.Restore(ctx, nt("t1"), interruptedTail(6), turn); !errors.Is(err, store.ErrFinished) {
		t.Errorf("Restore by an instance that does not run the ticket: %v, want ErrFinished", err)
	}
	if err := s.Restore(ctx, nt("t1"), interruptedTail(3), turn); !errors.Is(err, store.ErrSeq) {
		t.Errorf("Restore with a tail at a seq the log holds: %v, want ErrSeq", err)
	}
	for i := range 2 {
		if err := s.Restore(ctx, nt("t1"), interruptedTail(6), turn); err != nil {
			t.Fatalf("Restore, run %d: %v", i+1, err)
		}
	}
	b, err := s.Read(ctx, "t1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := storetestSeqs(b.Events); got != "1,2,3,6,7,8" || !b.Finished {
		t.Errorf("restored log %s (finished %v), want 1,2,3,6,7,8 finished", got, b.Finished)
	}

	// The whole ticket lost: re-created, ended, and the conversation takes the next ask.
	if _, err := s.CreateTicket(ctx, nt("t2"), store.Limits{}); err != nil {
		t.Fatal(err)
	}
	// As an AOF that lost its last second loses them: the ticket's keys and everything its
	// creation changed.
	if err := rc.Del(ctx, k0(prefix, "t:t2"), k0(prefix, "t:t2:log"), k0(prefix, "t:t2:steps")).Err(); err != nil {
		t.Fatal(err)
	}
	rc.HIncrBy(ctx, k0(prefix, "inflight"), "1:talice", -1)
	rc.HSet(ctx, k0(prefix, "c:c"), "running", "")
	if err := s.Append(ctx, "t2", storetest.Ev(2, gen.EventTypeStep)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("append to the lost ticket: %v, want ErrNotFound", err)
	}
	if err := s.Restore(ctx, nt("t2"), interruptedTail(3), turn); err != nil {
		t.Fatalf("Restore of a lost ticket: %v", err)
	}
	tk, err := s.Ticket(ctx, "t2")
	if err != nil || tk.State() != gen.AskStateError || tk.Owner != storetest.Alice || tk.LastSeq != 5 {
		t.Errorf("restored ticket %+v, %v", tk, err)
	}
	if b, err := s.Read(ctx, "t2", 0); err != nil || storetestSeqs(b.Events) != "1,3,4,5" {
		t.Errorf("restored log %v, %v; want 1,3,4,5", storetestSeqs(b.Events), err)
	}
	if _, err := s.CreateTicket(ctx, nt("t3"), store.Limits{MaxInFlightPerOwner: 1}); err != nil {
		t.Errorf("the next ask after a restored one: %v", err)
	}

	// A lost ticket whose creation wrote more than accepted (the service's supervisor branch
	// open, NewTicket.Then) is re-created with it: those events were admitted, not lost, and
	// the restored end closes the branch they open.
	open := storetest.Ev(2, gen.EventTypeBranch)
	t4 := nt("t4")
	t4.Then = []store.Event{open}
	storetest.MustConv(t, s, "c4", storetest.Alice)
	t4.ConversationID = "c4"
	if _, err := s.CreateTicket(ctx, t4, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := rc.Del(ctx, k0(prefix, "t:t4"), k0(prefix, "t:t4:log"), k0(prefix, "t:t4:steps")).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second as a retry after a lost reply
		if err := s.Restore(ctx, t4, interruptedTail(4), turn); err != nil {
			t.Fatalf("Restore of a lost ticket with a branch open, run %d: %v", i+1, err)
		}
	}
	b, err = s.Read(ctx, "t4", 0)
	if err != nil || storetestSeqs(b.Events) != "1,2,4,5,6" || !b.Finished {
		t.Fatalf("restored log %v (finished %v), %v; want 1,2,4,5,6 finished", storetestSeqs(b.Events), b.Finished, err)
	}
	if got := b.Events[1]; got.Type != open.Type || string(got.Data) != string(open.Data) {
		t.Errorf("restored seq 2: %s %s, want the admitted %s %s", got.Type, got.Data, open.Type, open.Data)
	}
	if tk, err := s.Ticket(ctx, "t4"); err != nil || tk.LastSeq != 6 || tk.State() != gen.AskStateError {
		t.Errorf("restored ticket %+v, %v; want last seq 6, state error", tk, err)
	}
}

func storetestSeqs(evs []store.Event) string {
	var out []string
	for _, ev := range evs {
		out = append(out, strconv.FormatInt(ev.Seq, 10))
	}
	return strings.Join(out, ",")
}

// A batch whose reply is lost (go-redis runs it again on a new connection, as the service's
// retry would): ok, each event once, in order; then a retry by the service of a batch that had
// landed, grown by the events emitted meanwhile, appends only the new ones.
func TestLostReplyToBatch(t *testing.T) {
	srv := redistest.Start(t)
	for _, then := range []faultproxy.Then{faultproxy.Close, faultproxy.Stall} {
		t.Run(then.String(), func(t *testing.T) {
			ctx := t.Context()
			s, p := behindProxy(t, srv, redisstore.Options{})
			storetest.MustConv(t, s, "c", storetest.Alice)
			if _, err := storetest.NewTicket(t, s, "t", "c", storetest.Alice, store.Limits{}); err != nil {
				t.Fatal(err)
			}
			batch := storetest.Evs(2, 3, gen.EventTypeStep)
			batch[2].Data = []byte(`"batch-lost"`)
			p.DropReplies(1, "batch-lost", then)
			if n, err := s.AppendBatch(ctx, "t", batch); err != nil || n != 0 {
				t.Fatalf("AppendBatch through a lost reply: %d, %v; want ok (the same events at the same seqs by the same runner)", n, err)
			}
			dropped(t, p, 1)
			if _, err := s.AppendBatch(ctx, "t", append(batch, storetest.Evs(5, 2, gen.EventTypeStep)...)); err != nil {
				t.Fatalf("the batch again with two more: %v", err)
			}
			b, err := s.Read(ctx, "t", 0)
			if got := storetestSeqs(b.Events); err != nil || got != "1,2,3,4,5,6" {
				t.Errorf("log %s, %v; want 1..6 once each", got, err)
			}
		})
	}
}

// A store opened from a URL honours a call's deadline against a stalled Redis: a readiness
// probe bounded at a fraction of a second answers then, not after go-redis's own read timeout
// (3 s) and its retries, which took a probe bounded at 2 s to 5 s in an audit.
func TestStalledRedisHonoursTheDeadline(t *testing.T) {
	srv := redistest.Start(t)
	s, p := redistest.StoreBehindProxy(t, srv, redisstore.Options{Prefix: "deadline:" + rand.Text() + ":"})
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.Stall()
	defer p.Pass()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Ping(ctx)
	// The bound is the client's read timeout, fifteen times the deadline: a stalled Ping
	// that ignored the deadline could not return before it.
	if took := time.Since(start); err == nil || took >= 3*time.Second {
		t.Errorf("Ping against a stalled Redis: %v after %v, want an error at the 200ms deadline", err, took)
	}
}

// A creation whose caller stops waiting (its context ends while Redis is stalled) answers a
// PendingError then, matching ErrUnavailable, where it would otherwise wait for the client's
// timeouts and retries; the creation, already on its way, takes effect when the stall ends,
// and the PendingError's Outcome says so.
func TestCreationOutlivesItsCaller(t *testing.T) {
	srv := redistest.Start(t)
	s, p := behindProxy(t, srv, redisstore.Options{})
	ctx := t.Context()
	// A first ticket opens the connection the creations go through: the stalled one is held
	// on it, not on a connection still being made.
	storetest.MustConv(t, s, "c-warm", storetest.Alice)
	if _, err := storetest.NewTicket(t, s, "t-warm", "c-warm", storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	storetest.MustConv(t, s, "c-late", storetest.Alice)

	p.Stall()
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := s.CreateTicket(cctx, store.NewTicket{ID: "t-late", ConversationID: "c-late", Owner: storetest.Alice,
		CreatedAt: time.Unix(1700000000, 0).UTC(), Accepted: storetest.Ev(1, gen.EventTypeAccepted)}, store.Limits{})
	p.Pass()
	var pending *store.PendingError
	if !errors.As(err, &pending) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("CreateTicket against a stalled Redis, its context ended: %v, want a PendingError matching ErrUnavailable", err)
	}
	if err := pending.Outcome(ctx); err != nil {
		t.Fatalf("the creation's outcome once the stall ended: %v, want it created", err)
	}
	if tk, err := s.Ticket(ctx, "t-late"); err != nil || tk.ConversationID != "c-late" {
		t.Fatalf("the late ticket: %+v, %v", tk, err)
	}
}

// A PendingError's Outcome is the creation's own answer, a refusal included (here: the
// conversation does not exist, so nothing was created and the caller has nothing to end), and
// it stays knowable: asked again, it answers the same at once.
func TestPendingCreationsOutcomeIsItsAnswer(t *testing.T) {
	srv := redistest.Start(t)
	s, p := behindProxy(t, srv, redisstore.Options{})
	ctx := t.Context()
	storetest.MustConv(t, s, "c-warm", storetest.Alice)
	if _, err := storetest.NewTicket(t, s, "t-warm", "c-warm", storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}

	p.Stall()
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := s.CreateTicket(cctx, store.NewTicket{ID: "t-nowhere", ConversationID: "c-none", Owner: storetest.Alice,
		CreatedAt: time.Unix(1700000000, 0).UTC(), Accepted: storetest.Ev(1, gen.EventTypeAccepted)}, store.Limits{})
	p.Pass()
	var pending *store.PendingError
	if !errors.As(err, &pending) {
		t.Fatalf("CreateTicket against a stalled Redis, its context ended: %v, want a PendingError", err)
	}
	first := pending.Outcome(ctx)
	if !errors.Is(first, store.ErrNotFound) {
		t.Fatalf("the outcome of a creation in a conversation that does not exist: %v, want ErrNotFound", first)
	}
	// Asked again: the same answer, not a wait for one that was already taken. The bound only
	// turns a wait into a failure.
	again, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	if err := pending.Outcome(again); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the outcome asked a second time: %v, want ErrNotFound again", err)
	}
}
