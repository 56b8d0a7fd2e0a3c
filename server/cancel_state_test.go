package server_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
)

// slowEnd is the memory store holding the first end it is given until release is closed (a
// store slow to take it); reading reports the first Read made while it holds it.
type slowEnd struct {
	*store.Memory
	holding atomic.Bool
	ending  chan struct{}
	release chan struct{}
	reading chan struct{}
	read    atomic.Bool
}

func (s *slowEnd) FinishCounted(ctx context.Context, ticket string, tail []store.Event, turn ask.Turn) (int, error) {
	if s.holding.CompareAndSwap(false, true) {
		close(s.ending)
		<-s.release
	}
	return s.Memory.FinishCounted(ctx, ticket, tail, turn)
}

func (s *slowEnd) Read(ctx context.Context, ticket string, after int64) (store.Batch, error) {
	if s.holding.Load() && s.read.CompareAndSwap(false, true) {
		close(s.reading)
	}
	return s.Memory.Read(ctx, ticket, after)
}

// TestCancelWhileTheEndIsWritten: a cancel that finds the run's end sealed but not yet
// written (the run answered a moment before; or another cancel sealed it) answers with that
// end's state, as the cancel that sealed it answers error. It answered "running" — from two
// concurrent cancels, one said error and the other running (two askd replicas on Redis and
// in memory, cancels racing each other and the run's end).
func TestCancelWhileTheEndIsWritten(t *testing.T) {
	st := &slowEnd{Memory: store.NewMemory(store.MemoryOptions{}), ending: make(chan struct{}),
		release: make(chan struct{}), reading: make(chan struct{})}
	t.Cleanup(func() { _ = st.Close() })
	h := newHarness(t, server.Options{Store: st})
	ticket := h.ask(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	select {
	case <-st.ending:
	case <-t.Context().Done():
		t.Fatal("the run's end never came")
	}
	answered := make(chan *gen.CancelAskResponse, 1)
	go func() { answered <- h.cancel(alice, ticket) }()
	select {
	case r := <-answered:
		close(st.release)
		t.Fatalf("cancel answered %d %s before the end it found sealed was written; want it to wait for it and answer answer", r.StatusCode(), r.Body)
	case <-st.reading:
		close(st.release)
	}
	r := <-answered
	if r.JSON202 == nil || r.JSON202.State != gen.AskStateAnswer {
		t.Fatalf("cancel: %d %s, want 202 with state answer", r.StatusCode(), r.Body)
	}
	checkLifecycle(t, h.events(alice, ticket), gen.EventTypeAnswer)
}
