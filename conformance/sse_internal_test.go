package conformance

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSSEReaderKeepsTheWireForm(t *testing.T) {
	in := ": ask events\nretry: 2000\n\n" +
		"id: 1\nevent: accepted\ndata: {\"seq\":1,\"type\":\"accepted\"}\n\n" +
		": keepalive\n\n" +
		": keepalive\nid: 7\n\n" +
		"id: 2\r\nevent: step\r\ndata: {\"seq\":2,\r\ndata: \"type\":\"step\"}\r\n\r\n" +
		"data:{\"seq\":3,\"type\":\"done\"}\n\n" +
		"id: 4\nevent: partial\ndata: {}"
	var tick time.Duration
	r := newSSEReader(strings.NewReader(in), func() time.Time { tick++; return time.Unix(0, 0).Add(tick) })
	var got []frame
	for {
		f, err := r.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		f.At = time.Time{}
		got = append(got, f)
	}
	want := []frame{
		{Comment: true, Text: " ask events"},
		{ID: "1", HasID: true, Event: "accepted", DataLines: []string{`{"seq":1,"type":"accepted"}`}},
		{Comment: true, Text: " keepalive"},
		{Comment: true, Text: " keepalive"},
		{ID: "7", HasID: true, IDOnly: true},
		{ID: "2", HasID: true, Event: "step", DataLines: []string{`{"seq":2,`, `"type":"step"}`}},
		{DataLines: []string{`{"seq":3,"type":"done"}`}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("frames:\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(r.retries, []string{"2000"}) {
		t.Errorf("retries %q, want [2000]", r.retries)
	}
}

func TestDecodeEvent(t *testing.T) {
	e := decodeEvent(frame{ID: "7", HasID: true, Event: "step", DataLines: []string{`{"seq":7,"type":"step","ms":12}`}})
	if e.Seq != 7 || e.Type != "step" || e.num("ms") != 12 || idSeq(e.frame) != 7 {
		t.Errorf("decoded %+v", e)
	}
	bad := decodeEvent(frame{DataLines: []string{"not json"}})
	if bad.Seq != -1 || bad.Obj != nil {
		t.Errorf("undecodable data gave seq %d, obj %v", bad.Seq, bad.Obj)
	}
}

func ev(seq int64, typ string, extra ...any) event {
	obj := map[string]any{"seq": float64(seq), "type": typ}
	for i := 0; i+1 < len(extra); i += 2 {
		obj[extra[i].(string)] = extra[i+1]
	}
	return event{Seq: seq, Type: typ, Obj: obj}
}

func TestSeqProblemsAllowOnlyEvictedSteps(t *testing.T) {
	tests := []struct {
		name   string
		events []event
		bound  int
		ok     bool
	}{
		{"gap-free", []event{ev(1, "accepted"), ev(2, "step"), ev(3, "answer"), ev(4, "done", "steps", 1.0)}, 1000, true},
		{"one step evicted past the bound", []event{ev(1, "accepted"), ev(3, "answer"), ev(4, "done", "steps", 1.0)}, 3, true},
		{"a step missing from a run within the bound", []event{ev(1, "accepted"), ev(3, "answer"), ev(4, "done", "steps", 1.0)}, 1000, false},
		{"two missing where the bound allows one", []event{ev(1, "accepted"), ev(4, "answer"), ev(5, "done", "steps", 2.0)}, 4, false},
		{"a gap no eviction explains", []event{ev(1, "accepted"), ev(3, "answer"), ev(4, "done", "steps", 0.0)}, 3, false},
		{"starts at 2", []event{ev(2, "accepted"), ev(3, "done", "steps", 0.0)}, 1000, false},
		{"duplicate", []event{ev(1, "accepted"), ev(1, "accepted"), ev(2, "done", "steps", 0.0)}, 1000, false},
		{"gap and no done", []event{ev(1, "accepted"), ev(3, "step")}, 1000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := seqProblems("x", &capture{Events: tt.events}, tt.bound)
			if (len(got) == 0) != tt.ok {
				t.Errorf("problems %v, want ok=%v", got, tt.ok)
			}
		})
	}
}

func TestReplayPositionsIncludeAnEvictedSeq(t *testing.T) {
	c := &capture{Events: []event{ev(1, "accepted"), ev(2, "branch"), ev(5, "milestone"), ev(9, "answer"), ev(10, "done")}}
	got := replayPositions(c)
	want := []int64{0, 1, 3, 5, 9, 10}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("positions %v, want %v", got, want)
	}
}

func TestEvictionNeedsARunLongerThanTheBound(t *testing.T) {
	run := func(seqs ...int64) *capture {
		c := &capture{}
		for i, q := range seqs {
			typ := "step"
			switch {
			case i == 0:
				typ = "accepted"
			case i == len(seqs)-1:
				typ = "done"
			}
			c.Events = append(c.Events, ev(q, typ))
		}
		return c
	}
	tests := []struct {
		name      string
		c         *capture
		bound     int
		afterDone bool
		ok        bool
	}{
		{"nothing missing", run(1, 2, 3, 4), 8, true, true},
		{"a gap in a run within the bound", run(1, 3, 4), 8, false, false},
		{"as many missing as the bound lets be evicted", run(1, 4, 5, 6), 4, true, true},
		{"one more missing than that", run(1, 5, 6), 4, true, false},
		{"more retained than the bound, steps among them, after done", run(1, 2, 3, 4, 5), 4, true, false},
		{"more retained than the bound, none of them a step, after done", &capture{Events: []event{ev(1, "accepted"), ev(2, "branch"),
			ev(3, "milestone"), ev(5, "milestone"), ev(7, "branch"), ev(8, "answer"), ev(9, "done")}}, 4, true, true},
		{"more than the bound seen live is fine", run(1, 2, 3, 4, 5), 4, false, true},
		{"no done: nothing to judge by", &capture{Events: []event{ev(1, "accepted"), ev(3, "step")}}, 8, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := evictionProblems("x", tt.c, tt.bound, tt.afterDone)
			if (len(got) == 0) != tt.ok {
				t.Errorf("problems %v, want ok=%v", got, tt.ok)
			}
		})
	}
}
