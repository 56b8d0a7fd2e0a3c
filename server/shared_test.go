package server_test

import (
	"context"
	"crypto/rand"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// replicaStore opens one replica's Redis store on srv under prefix, closed after the
// replica's server has shut down.
func replicaStore(t *testing.T, srv *redistest.Server, prefix string, lease time.Duration) *redisstore.Store {
	t.Helper()
	return replicaStoreWith(t, srv, redisstore.Options{Prefix: prefix, Lease: lease})
}

// replicaStoreWith is replicaStore with more of the store's options set (its URL is srv's).
func replicaStoreWith(t *testing.T, srv *redistest.Server, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	opts.URL = srv.URL
	s, err := redisstore.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// clusterStore is replicaStoreWith on a Redis Cluster: the store opened on c with opts, closed
// when the test ends.
func clusterStore(t *testing.T, c *redistest.Cluster, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	opts.URL = c.URL()
	s, err := redisstore.New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// blockingRunner reports one step, then waits for its context; started reports each run's
// start and stopped its context ending.
func blockingRunner(started, stopped chan<- string) ask.Runner {
	return ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		emit.Step(step(0))
		emit.ModelCall(ask.Usage{InputTokens: 7, OutputTokens: 3})
		started <- req.Ticket
		<-ctx.Done()
		stopped <- req.Ticket
		emit.Step(step(1)) // a tool call completing after the end leaves nothing behind
		return ask.Outcome{Answer: answer("too late")}
	})
}

// stepStored is Hooks that report, without blocking, each ticket a step of which the store took.
func stepStored(stored chan<- string) server.Hooks {
	return server.Hooks{Appended: func(ticket string, typ gen.EventType, _ any, _ int) {
		if typ == gen.EventTypeStep {
			select {
			case stored <- ticket:
			default:
			}
		}
	}}
}

func within(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10s", what)
		return ""
	}
}

// TestReplicasShareTickets: two replicas over one Redis; the ask is made on A, its stream and
// status read on B, and a cancel sent to B ends the log at once and stops A's runner.
func TestReplicasShareTickets(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "srv:" + rand.Text() + ":"
	started, stopped, stored := make(chan string, 1), make(chan string, 1), make(chan string, 1)
	a := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, 0), Runner: blockingRunner(started, stopped),
		Hooks: stepStored(stored)})
	b := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, 0), Runner: answerRunner(1)})

	cid := a.conv(alice)
	ticket := b.ask(alice, cid, "How many sev1 incidents did we have in 2026-Q2?") // B runs it: swap roles below
	_ = b.events(alice, ticket)
	ticket = a.ask(alice, cid, "And in 2026-Q3?")
	within(t, started, "the run on A")
	// A's runner emitted its step before it started waiting; on a shared store the step is
	// written behind the runner's back, and a cancel that arrived first would rightly end the
	// log without it. The cancel below is meant to find it there.
	within(t, stored, "A's step stored")
	if st := b.status(bob, ticket); st.StatusCode() != 404 {
		t.Errorf("bob reads alice's ticket on B: %d, want 404", st.StatusCode())
	}
	if r := b.cancel(alice, ticket); r.StatusCode() != 202 {
		t.Fatalf("cancel on B: %d", r.StatusCode())
	}
	frames := b.events(alice, ticket)
	terminal, done := checkLifecycle(t, frames, gen.EventTypeError)
	if terminal.Kind != "cancelled" {
		t.Errorf("terminal kind %q, want cancelled", terminal.Kind)
	}
	if done.Steps != 1 {
		t.Errorf("done.steps = %d, want 1", done.Steps)
	}
	within(t, stopped, "A's runner stopping after the cancel on B")
	if st := a.status(alice, ticket); st.JSON200 == nil || st.JSON200.State != gen.AskStateError {
		t.Errorf("status on A after the cancel on B: %+v", st.JSON200)
	}
	// The conversation remembers both asks, on either replica.
	if r := b.cancel(alice, ticket); r.StatusCode() != 202 {
		t.Errorf("second cancel: %d", r.StatusCode())
	}
	if again := b.events(alice, ticket); len(again) != len(frames) {
		t.Errorf("a cancel after done changed the log: %v then %v", types(frames), types(again))
	}
}

// TestLapsedLeaseInterrupted: replica A stops renewing its lease (as if it died); replica B
// ends the run with error{interrupted} and done, exactly once, and A, coming back, is fenced
// off: its runner is stopped and nothing it emits reaches the log.
func TestLapsedLeaseInterrupted(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "lapse:" + rand.Text() + ":"
	lease := 300 * time.Millisecond
	started, stopped, stored := make(chan string, 1), make(chan string, 1), make(chan string, 1)
	a := newHarness(t, server.Options{Store: silentRenewal{replicaStore(t, srv, prefix, lease)}, Runner: blockingRunner(started, stopped),
		Hooks: stepStored(stored)})
	b := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, lease), Runner: answerRunner(1)})

	cid := a.conv(alice)
	ticket := a.ask(alice, cid, "Take your time: how many sev1 incidents did we have in 2026-Q2?")
	within(t, started, "the run on A")
	within(t, stored, "A's step stored") // before its lease can lapse: see TestReplicasShareTickets
	frames := b.events(alice, ticket)    // ends when B's sweep ends the run
	terminal, done := checkLifecycle(t, frames, gen.EventTypeError)
	if terminal.Kind != "interrupted" {
		t.Errorf("terminal kind %q, want interrupted", terminal.Kind)
	}
	if done.Steps != 1 {
		t.Errorf("done.steps = %d, want 1", done.Steps)
	}
	within(t, stopped, "A's runner stopping once the run was ended elsewhere")
	if again := a.events(alice, ticket); len(again) != len(frames) {
		t.Errorf("the old replica changed the log: %v then %v", types(frames), types(again))
	}
	// The conversation is free again, and remembers the interrupted turn.
	next := a.ask(alice, cid, "How many sev1 incidents did we have in 2026-Q2?")
	within(t, started, "the next run on A")
	_ = a.cancel(alice, next)
	within(t, stopped, "the next run stopping")
}

// silentRenewal is a replica that has lost the ability to renew its lease.
type silentRenewal struct{ *redisstore.Store }

func (silentRenewal) Renew(context.Context, string, store.Usage) error { return nil }

// TestRemoteCancelWhileEmitting: a cancel on B while A's runner appends steps back to back —
// B's end must continue a log that keeps moving (it re-reads and retries), and the log still
// ends exactly once: error{cancelled}, then done, with no step after them.
func TestRemoteCancelWhileEmitting(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "busy:" + rand.Text() + ":"
	started, stopped := make(chan string, 1), make(chan string, 1)
	busy := ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		started <- req.Ticket
		for i := 0; ctx.Err() == nil; i++ {
			emit.Step(step(i))
		}
		stopped <- req.Ticket
		return ask.Outcome{Answer: answer("too late")}
	})
	// The run emits until the cancel reaches it, often past the store's default bound of 1000
	// events (under load, nearly every other run): the stores keep 100_000 too
	// (server.Options.MaxEvents bounds only the Memory store the server makes itself), or the
	// log rightly loses its oldest steps, and checkLifecycle holds only for a log
	// nothing was evicted from.
	keepAll := redisstore.Options{Prefix: prefix, MaxEvents: 100_000}
	a := newHarness(t, server.Options{Store: replicaStoreWith(t, srv, keepAll), Runner: busy, MaxEvents: 100_000})
	b := newHarness(t, server.Options{Store: replicaStoreWith(t, srv, keepAll), Runner: answerRunner(1), MaxEvents: 100_000})
	ticket := a.ask(alice, a.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	within(t, started, "the run on A")
	if r := b.cancel(alice, ticket); r.StatusCode() != 202 {
		t.Fatalf("cancel on B: %d %s", r.StatusCode(), r.Body)
	}
	within(t, stopped, "A's runner stopping after the cancel on B")
	frames := b.events(alice, ticket)
	terminal, done := checkLifecycle(t, frames, gen.EventTypeError)
	if terminal.Kind != "cancelled" {
		t.Errorf("terminal kind %q, want cancelled", terminal.Kind)
	}
	if steps := int64(len(frames) - 5); done.Steps != steps {
		t.Errorf("done.steps = %d, want the %d steps in the log", done.Steps, steps)
	}
}

// TestHeldRunsHaveNoGoroutineOfTheirOwn: a run on a shared store holds its lease (renewals,
// the watch for an end from elsewhere) without a goroutine of its own: while runs wait, each
// costs its runner's goroutine and nothing more. Before, each had a second goroutine blocked
// for its whole life, woken by its own end. The runs still stop at a cancel received by
// another replica.
func TestHeldRunsHaveNoGoroutineOfTheirOwn(t *testing.T) {
	const n = 40
	srv := redistest.Start(t)
	prefix := "held:" + rand.Text() + ":"
	started, stopped := make(chan string, n+1), make(chan string, n+1)
	a := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, 0), Runner: blockingRunner(started, stopped), MaxInFlight: 2 * n})
	b := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, 0), Runner: answerRunner(1)})
	// One run first, so that the client's connection and the store's goroutines are all up.
	first := a.ask(alice, a.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	within(t, started, "the first run")
	convs := make([]string, n)
	for i := range convs {
		convs[i] = a.conv(alice)
	}
	before := runtime.NumGoroutine()
	tickets := make([]string, n)
	for i, cid := range convs {
		tickets[i] = a.ask(alice, cid, "How many sev1 incidents did we have in 2026-Q2?")
		within(t, started, "run "+strconv.Itoa(i))
	}
	// Each run: its runner's goroutine. A second per run (the old lease goroutine) would
	// add n; a few goroutines of the client or the store may come and go meanwhile.
	if grew := runtime.NumGoroutine() - before; grew > n+n/4 {
		t.Errorf("%d running asks added %d goroutines, want about %d (one each)", n, grew, n)
	}
	for _, id := range append(tickets, first) {
		if r := b.cancel(alice, id); r.StatusCode() != 202 {
			t.Fatalf("cancel on B: %d %s", r.StatusCode(), r.Body)
		}
		within(t, stopped, "A's runner stopping after the cancel on B")
	}
}

// TestLeaseOnStoresWithoutCallbacks: a shared store that cannot call back at an end still
// stops the run at once when another replica cancels it: one that hands out a channel
// (WatchFinished), and one with nothing but store.Shared, whose log is read to learn of the
// end. The lease (a minute) is renewed only after the test's wait, so the watch alone can
// stop the run.
func TestLeaseOnStoresWithoutCallbacks(t *testing.T) {
	for name, wrap := range map[string]func(*redisstore.Store) store.Store{
		"channel": func(s *redisstore.Store) store.Store { return channelWatch{s, s} },
		"read":    func(s *redisstore.Store) store.Store { return sharedOnly{s} },
	} {
		t.Run(name, func(t *testing.T) {
			srv := redistest.Start(t)
			prefix := "nocb:" + rand.Text() + ":"
			started, stopped := make(chan string, 1), make(chan string, 1)
			a := newHarness(t, server.Options{Store: wrap(replicaStore(t, srv, prefix, time.Minute)), Runner: blockingRunner(started, stopped)})
			b := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, time.Minute), Runner: answerRunner(1)})
			ticket := a.ask(alice, a.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
			within(t, started, "the run on A")
			if r := b.cancel(alice, ticket); r.StatusCode() != 202 {
				t.Fatalf("cancel on B: %d %s", r.StatusCode(), r.Body)
			}
			within(t, stopped, "A's runner stopping after the cancel on B")
			if terminal, _ := checkLifecycle(t, a.events(alice, ticket), gen.EventTypeError); terminal.Kind != "cancelled" {
				t.Errorf("terminal kind %q, want cancelled", terminal.Kind)
			}
		})
	}
}

// sharedOnly is a shared store with store.Shared's methods and nothing more.
type sharedOnly struct{ store.Shared }

// channelWatch is a shared store whose end watch is a channel (WatchFinished), without
// NotifyFinished.
type channelWatch struct {
	store.Shared
	w interface {
		WatchFinished(ctx context.Context, ticket string) (bool, <-chan struct{}, error)
	}
}

func (c channelWatch) WatchFinished(ctx context.Context, ticket string) (bool, <-chan struct{}, error) {
	return c.w.WatchFinished(ctx, ticket)
}
