package server_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/das-ask/ask/server"
)

// TestAdmittedHookPanicLeavesNothing: a panicking Admitted hook (an observer's bug) is logged
// and the ask goes on. Carried up to the handler's recovery, it answered 500 and left the
// ticket it had just created running for good: its admission slot held, its conversation
// answering 409 to the next ask, and Shutdown waiting for it until its context ended.
func TestAdmittedHookPanicLeavesNothing(t *testing.T) {
	var n atomic.Int32
	h := newHarness(t, server.Options{Hooks: server.Hooks{Admitted: func(context.Context, server.Admission) {
		if n.Add(1) == 1 {
			panic("observer bug")
		}
	}}})
	cid := h.conv(alice)
	r := h.askRaw(alice, cid, "first question q1")
	if r.JSON202 == nil {
		t.Fatalf("ask with a panicking hook: %d %s, want 202", r.StatusCode(), r.Body)
	}
	if evs := h.events(alice, r.JSON202.Ticket); len(evs) == 0 || evs[len(evs)-1].Event != "done" {
		t.Errorf("the ask's log does not end in done: %+v", evs)
	}
	if r := h.askRaw(alice, cid, "second question q2"); r.StatusCode() != http.StatusAccepted {
		t.Errorf("next ask in the conversation: %d %s, want 202", r.StatusCode(), r.Body)
	}
	if !strings.Contains(h.logs.String(), "Admitted hook panicked") {
		t.Errorf("the hook's panic was not logged:\n%s", h.logs.String())
	}
}
