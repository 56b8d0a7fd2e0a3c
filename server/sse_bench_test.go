package server

import (
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
)

// benchStep is a realistic step: the demo's query tool with its SQL.
func benchStep() gen.StepBody {
	return gen.StepBody{
		CallId: "call_100000", Tool: "run_query", Source: "demo", Ms: 12,
		Args: map[string]any{"sql": "SELECT COUNT(*) AS sev1_incidents FROM incidents WHERE severity = 'sev1' AND quarter = '2026-Q2'"},
	}
}

// BenchmarkEncodeEvent is encoding one step event once, as the log keeps it.
func BenchmarkEncodeEvent(b *testing.B) {
	env := envelope{seq: 42, ticket: "t_BENCHBENCHBENCHBENCHBENCHBE", conv: "c_BENCHBENCHBENCHBENCHBENCHBE", ts: time.Now(), typ: gen.EventTypeStep}
	body := benchStep()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeEvent(env, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFrame is framing one encoded event for SSE (id, event, data lines) into the
// stream's buffer, and writing it to a response.
func BenchmarkFrame(b *testing.B) {
	ev, err := encodeEvent(envelope{seq: 42, ticket: "t_BENCHBENCHBENCHBENCHBENCHBE", conv: "c_BENCHBENCHBENCHBENCHBENCHBE", ts: time.Now(), typ: gen.EventTypeStep}, benchStep())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("frame", func(b *testing.B) {
		o := &sseWriter{pool: new(sync.Pool)}
		b.SetBytes(int64(len(ev.Data)))
		b.ReportAllocs()
		for b.Loop() {
			o.frame(ev)
			o.buf = o.buf[:0]
		}
	})
	b.Run("frame+write", func(b *testing.B) {
		w := httptest.NewRecorder()
		o := &sseWriter{w: w, pool: new(sync.Pool)}
		b.SetBytes(int64(len(ev.Data)))
		b.ReportAllocs()
		for b.Loop() {
			o.frame(ev)
			if _, err := o.w.Write(o.buf); err != nil {
				b.Fatal(err)
			}
			o.buf = o.buf[:0]
			w.Body.Reset()
		}
	})
}
