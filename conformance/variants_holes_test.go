package conformance_test

import (
	"net/http"
	"sync"
	"time"
)

// perStream keeps one value per relayed stream for a variant's frame function.
type perStream[T any] struct {
	mu sync.Mutex
	m  map[*streamState]*T
}

func (p *perStream[T]) of(st *streamState) *T {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[*streamState]*T{}
	}
	v, ok := p.m[st]
	if !ok {
		v = new(T)
		p.m[st] = v
	}
	return v
}

// dropFirstStep drops the first step of every stream, live and replayed: a service that loses
// an event in a run far shorter than its buffer, while done.steps still counts it.
func dropFirstStep() func(*proxy, *streamState, sseFrame) []sseFrame {
	var dropped perStream[bool]
	return func(_ *proxy, st *streamState, f sseFrame) []sseFrame {
		if m := f.data(); m != nil && m["type"] == "step" {
			if d := dropped.of(st); !*d {
				*d = true
				return nil
			}
		}
		return []sseFrame{f}
	}
}

// hideFirstCall hides a run's first tool call altogether, from every stream read from the
// start: its step is dropped, every later seq is renumbered to close the gap, and done.steps no
// longer counts it. The stream is self-consistent; only the source's audit log shows the call.
func hideFirstCall() func(*proxy, *streamState, sseFrame) []sseFrame {
	type state struct{ fromStart, hidden bool }
	var streams perStream[state]
	return func(_ *proxy, st *streamState, f sseFrame) []sseFrame {
		m := f.data()
		if m == nil {
			return []sseFrame{f}
		}
		s := streams.of(st)
		if m["type"] == "accepted" && m["seq"].(float64) == 1 {
			s.fromStart = true
		}
		if !s.fromStart {
			return []sseFrame{f}
		}
		if m["type"] == "step" && !s.hidden {
			s.hidden = true
			return nil
		}
		if !s.hidden {
			return []sseFrame{f}
		}
		m["seq"] = m["seq"].(float64) - 1
		if m["type"] == "done" {
			m["steps"] = m["steps"].(float64) - 1
		}
		return []sseFrame{eventFrame(m)}
	}
}

// holeVariants are the broken services of issue 23: each a defect the suite once passed.
func holeVariants(_ time.Duration) []variant {
	return []variant{
		{name: "drop-a-step", fails: []string{"events.seq-gap-free", "audit.every-call-streamed"},
			frame: dropFirstStep()},
		{name: "hide-a-call", fails: []string{"audit.every-call-streamed"},
			frame: hideFirstCall()},
		{name: "json-not-the-yaml", fails: []string{"schema.json-equals-yaml"},
			body: editJSON(http.MethodGet, "v1/openapi.json", http.StatusOK, func(m map[string]any) {
				delete(m["components"].(map[string]any)["schemas"].(map[string]any), "EventType")
			})},
	}
}
