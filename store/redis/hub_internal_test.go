package redis

import "testing"

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
