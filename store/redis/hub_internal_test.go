package redis

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// A function taken off a ticket's end watch is not kept reachable by the watch: its slot in the
// slice's spare capacity is cleared, for the function holds its lease and its run until the
// watch closes otherwise.
func TestUnnotifyClearsTheSlot(t *testing.T) {
	h := newHub(nil, 0, 0, 0)
	var cs []*endFunc
	for range 3 {
		c, _, done, _ := h.endNotify("t_1", func() {})
		if done {
			t.Fatal("endNotify: the ticket reads done")
		}
		cs = append(cs, c)
	}
	if !h.unnotify("t_1", cs[0]) {
		t.Fatal("unnotify: the function was not on the watch")
	}
	w := h.ends["t_1"]
	if len(w.calls) != 2 || w.calls[0] != cs[1] || w.calls[1] != cs[2] {
		t.Fatalf("calls after unnotify = %v, want the second and third", w.calls)
	}
	if spare := w.calls[:cap(w.calls)]; len(spare) > 2 && spare[2] != nil {
		t.Errorf("the vacated slot still holds %p: the function taken off stays reachable", spare[2])
	}
	if h.unnotify("t_1", cs[0]) {
		t.Error("unnotify of a function already taken off reports true")
	}
}

// After a reconnect the hub answers, of each ticket not known finished, the highest seq its
// readers may have been given (the floors, floor.go): the last it read, even when it threw the
// events away since (a log read shorter than its buffer, as a Redis that lost writes holds),
// and a reader's cursor past what it read. A finished ticket has no floor.
func TestResetAnswersTheFloors(t *testing.T) {
	logs := map[string][]store.Event{}
	finished := map[string]bool{}
	put := func(id string, n int) {
		logs[id] = nil
		for i := 1; i <= n; i++ {
			logs[id] = append(logs[id], store.Event{Seq: int64(i), Type: gen.EventTypeStep, Data: []byte(`{}`)})
		}
	}
	h := newHub(func(_ context.Context, id string, after int64) (fetched, error) {
		var evs []store.Event
		for _, e := range logs[id] {
			if e.Seq > after {
				evs = append(evs, e)
			}
		}
		return fetched{events: evs, finished: finished[id], length: int64(len(logs[id])), ttl: time.Hour}, nil
	}, 100, 1<<20, time.Hour)
	read := func(id string, after int64) {
		t.Helper()
		if _, err := h.read(t.Context(), id, after); err != nil {
			t.Fatal(err)
		}
	}
	put("read", 6)
	read("read", 0)
	put("shrunk", 6)
	read("shrunk", 0)
	put("shrunk", 3) // the store lost 4–6: the next read throws the buffer away
	h.changed("shrunk", 0, false)
	read("shrunk", 6)
	put("cursor", 3)
	read("cursor", 9)
	put("done", 5)
	finished["done"] = true
	read("done", 0)

	got := h.reset()
	want := map[string]int64{"read": 6, "shrunk": 6, "cursor": 9}
	if !maps.Equal(got, want) {
		t.Errorf("floors %v, want %v", got, want)
	}
	if again := h.reset(); len(again) != 0 {
		t.Errorf("a second reset answers %v, want none: every tail was dropped", again)
	}
}

// A tail not known finished is read from the store again once recheckAfter has passed since
// it was last read, notified or not: a notification can be lost while the subscription stays up
// (the Redis Cluster node holding it frozen past cluster-node-timeout drops the cluster bus's
// links, and what the other nodes published meanwhile). Answered from memory for good, a
// stream whose ticket ended unheard waited for good (a black-box probe, 2026-12-06: two
// phase-2 streams on one replica read keep-alives for 6.6 minutes after their tickets had
// ended, after the subscription's primary was SIGSTOPped 15 s and its replica elected). A
// stream reads at each keep-alive, so it now gets the end then.
func TestTailIsReadAgainWithoutANotification(t *testing.T) {
	logs := map[string][]store.Event{}
	finished := map[string]bool{}
	reads := 0
	put := func(id string, n int) {
		for i := len(logs[id]) + 1; i <= n; i++ {
			logs[id] = append(logs[id], store.Event{Seq: int64(i), Type: gen.EventTypeStep, Data: []byte(`{}`)})
		}
	}
	h := newHub(func(_ context.Context, id string, after int64) (fetched, error) {
		reads++
		var evs []store.Event
		for _, e := range logs[id] {
			if e.Seq > after {
				evs = append(evs, e)
			}
		}
		return fetched{events: evs, finished: finished[id], length: int64(len(logs[id])), ttl: time.Hour}, nil
	}, 100, 1<<20, time.Hour)
	now := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	h.now = func() time.Time { return now }

	put("t", 3)
	if b, err := h.read(t.Context(), "t", 0); err != nil || len(b.Events) != 3 {
		t.Fatalf("first read: %d events, %v", len(b.Events), err)
	}
	put("t", 5) // appended and ended elsewhere; neither notification arrives
	finished["t"] = true
	now = now.Add(time.Second)
	if b, _ := h.read(t.Context(), "t", 3); len(b.Events) != 0 || reads != 1 {
		t.Fatalf("within recheckAfter: %d events after %d reads, want the tail answered from memory", len(b.Events), reads)
	}
	now = now.Add(10 * time.Second) // a keep-alive at the default DAS_ASK_KEEPALIVE_S
	b, err := h.read(t.Context(), "t", 3)
	if err != nil || len(b.Events) != 2 || !b.Finished {
		t.Fatalf("10 s later: %d events, finished %v, %v; want seqs 4 and 5 and the end, read from the store", len(b.Events), b.Finished, err)
	}
	now = now.Add(time.Minute)
	if _, err := h.read(t.Context(), "t", 5); err != nil || reads != 2 {
		t.Errorf("a finished tail: %d reads, %v; want it answered from memory until its TTL", reads, err)
	}
}
