package server_test

import (
	"context"
	"crypto/rand"
	"sync/atomic"
	"testing"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// heldAppend is a replica's Redis store whose first append of a step is taken by Redis and
// then held, its reply not yet back, until release is closed: the moment between the store
// taking a batch and the writer learning that it did.
type heldAppend struct {
	*redisstore.Store
	armed   atomic.Bool
	taken   chan struct{}
	release chan struct{}
}

func (s *heldAppend) AppendBatch(ctx context.Context, ticket string, evs []store.Event) (int, error) {
	n, err := s.Store.AppendBatch(ctx, ticket, evs)
	for _, ev := range evs {
		if ev.Type == gen.EventTypeStep && err == nil && s.armed.CompareAndSwap(true, false) {
			close(s.taken)
			<-s.release
			break
		}
	}
	return n, err
}

// TestEndedElsewhereWhileAppending: a cancel on replica B ends the log while A's writer waits
// for the reply to a batch Redis has taken; A sees the end (its lease's watch) and drops what
// it had to write, and then the reply comes. The writer must stop there: it went on to trim
// the outbox the end had emptied, and the replica panicked (slice bounds out of range in
// flushLocked), killing every run it held — reproduced from outside with two askd replicas
// and cancels sent to the other one.
func TestEndedElsewhereWhileAppending(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "held:" + rand.Text() + ":"
	held := &heldAppend{Store: replicaStore(t, srv, prefix, 0), taken: make(chan struct{}), release: make(chan struct{})}
	held.armed.Store(true)
	started, stopped := make(chan string, 1), make(chan string, 1)
	elsewhere := make(chan string, 1)
	a := newHarness(t, server.Options{Store: held, Runner: blockingRunner(started, stopped),
		Hooks: server.Hooks{Ended: func(ticket string, e server.End) {
			if e.Reason == "ended_elsewhere" {
				elsewhere <- ticket
			}
		}}})
	b := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, 0), Runner: answerRunner(1)})

	ticket := a.ask(alice, a.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	within(t, started, "the run on A")
	select {
	case <-held.taken:
	case <-t.Context().Done():
		t.Fatal("the step's append never came")
	}
	if r := b.cancel(alice, ticket); r.StatusCode() != 202 {
		t.Fatalf("cancel on B: %d %s", r.StatusCode(), r.Body)
	}
	within(t, elsewhere, "A seeing the end written on B")
	close(held.release)
	within(t, stopped, "A's runner stopping")
	terminal, _ := checkLifecycle(t, b.events(alice, ticket), gen.EventTypeError)
	if terminal.Kind != string(gen.ErrorKindCancelled) {
		t.Errorf("terminal kind %q, want cancelled", terminal.Kind)
	}
	// A still serves: the next ask on it runs and is cancelled as any other.
	next := a.ask(alice, a.conv(alice), "And in 2026-Q3?")
	within(t, started, "the next run on A")
	if r := a.cancel(alice, next); r.StatusCode() != 202 {
		t.Errorf("cancel on A: %d", r.StatusCode())
	}
	within(t, stopped, "the next run stopping")
}
