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
