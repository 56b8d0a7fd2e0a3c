package server_test

import (
	"bufio"
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/store/redis/redistest"
)

// shrunkStore answers every Read, once told to, as a store that lost the log's last writes
// after a replica ended the run after what it kept: finished, nothing after the cursor (a
// Sentinel failover's window, docs/scale-out.md "On Sentinel", in which a stream read the old
// primary and the run's lease then lapsed on the new one).
type shrunkStore struct {
	*store.Memory
	shrunk atomic.Bool
}

func (s *shrunkStore) Read(ctx context.Context, id string, after int64) (store.Batch, error) {
	if s.shrunk.Load() {
		return store.Batch{Finished: true}, nil
	}
	return s.Memory.Read(ctx, id, after)
}

// TestStreamOverALogThatEndedBelowIt: a stream whose log is found finished below the events it
// has sent ends, and says so in a warning (the store lost acknowledged writes): it neither waits
// for a done that will not come nor ends in silence. A stream opened at done's seq ends too,
// without the warning: nothing follows its cursor, and nothing was lost.
func TestStreamOverALogThatEndedBelowIt(t *testing.T) {
	st := &shrunkStore{Memory: store.NewMemory(store.MemoryOptions{TTL: time.Hour, MaxEvents: 1000})}
	mid, resume := make(chan string, 1), make(chan struct{})
	h := newHarness(t, server.Options{Store: st, Runner: phasedRunner(2, 1, mid, resume)})
	ticket := h.ask(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	within(t, mid, "the run's first steps")

	resp := h.stream(t.Context(), alice, ticket, nil)
	br := bufio.NewReader(resp.Body)
	var got []frame
	for len(got) < 5 { // accepted, the branch's open, a milestone, 2 steps
		f, err := readFrame(br)
		if err != nil {
			t.Fatalf("reading the stream: %v after %v", err, types(got))
		}
		if f.Event != "" {
			got = append(got, f)
		}
	}
	st.shrunk.Store(true)
	close(resume) // the run's next append wakes the stream, which reads the shrunk log
	ended := make(chan []frame, 1)
	go func() { ended <- readAll(t, br) }()
	select {
	case rest := <-ended:
		if len(rest) != 0 {
			t.Errorf("the stream went on with %v after the log ended below it", types(rest))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end within 10s of its log ending below it")
	}
	const warning = "the ticket's log ended below events this stream had sent"
	if n := strings.Count(h.logs.String(), warning); n != 1 {
		t.Errorf("%d warnings of the lost writes, want 1: %s", n, h.logs.String())
	}

	// The run's end, as the store holds it, then a stream opened at its done: no warning.
	st.shrunk.Store(false)
	var last int64
	redistest.Poll(t, "the run's end", func() bool {
		s := h.status(alice, ticket)
		if s.JSON200 == nil || s.JSON200.State == gen.AskStateRunning {
			return false
		}
		last = s.JSON200.LastSeq
		return true
	})
	cursor := strconv.FormatInt(last, 10)
	resp = h.stream(t.Context(), alice, ticket, &gen.StreamEventsParams{LastEventID: &cursor})
	if rest := readAll(t, resp.Body); len(rest) != 0 {
		t.Errorf("a stream opened at done read %v", types(rest))
	}
	if n := strings.Count(h.logs.String(), warning); n != 1 {
		t.Errorf("a stream opened at done warned of lost writes: %d warnings", n)
	}
}
