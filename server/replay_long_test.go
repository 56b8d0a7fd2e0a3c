package server_test

import (
	"testing"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// TestLongReplayInChunks replays a finished log far larger than one write of the stream (the
// stream writes a long batch in pieces of about 32 KB): every event arrives once, in order,
// with the lifecycle intact.
func TestLongReplayInChunks(t *testing.T) {
	const steps = 900
	h := newHarness(t, server.Options{Runner: answerRunner(steps), MaxEvents: 2000})
	ticket := h.ask(alice, h.conv(alice), "replay a long log")
	h.events(alice, ticket)           // follows the run to done, then…
	frames := h.events(alice, ticket) // …replays the finished log in one batch
	size := 0
	for _, f := range frames {
		size += len(f.Data)
	}
	if size < 3*32<<10 {
		t.Fatalf("the log is %d bytes; the test needs several chunks", size)
	}
	checkLifecycle(t, frames, gen.EventTypeAnswer)
	if got, want := len(frames), steps+6; got != want { // accepted, open, milestone, the steps, close, answer, done
		t.Logf("types: %v", types(frames[:8]))
		t.Fatalf("got %d events, want %d", got, want)
	}
}
