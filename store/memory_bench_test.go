package store_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// benchEvent is a step event of the size the service writes (about 370 bytes of JSON).
func benchEvent(seq int64) store.Event {
	data := []byte(`{"seq":` + strconv.FormatInt(seq, 10) + `,"ticket":"t_BENCHBENCHBENCHBENCHBENCHBE","conversation_id":"c_BENCHBENCHBENCHBENCHBENCHBE","ts":"2026-11-29T21:00:00.123456789Z","type":"step","args":{"sql":"SELECT COUNT(*) AS sev1_incidents FROM incidents WHERE severity = 'sev1' AND quarter = '2026-Q2'"},"call_id":"call_100000","ms":12,"refused":false,"source":"demo","tool":"run_query"}`)
	return store.Event{Seq: seq, Type: gen.EventTypeStep, Data: data}
}

// benchTicket registers a running ticket "t" whose log holds accepted and then n-1 steps.
func benchTicket(b *testing.B, m *store.Memory, n int) {
	b.Helper()
	ctx := context.Background()
	owner := store.Owner{Tenant: "bench", OID: "bench"}
	if err := m.CreateConversation(ctx, store.Conversation{ID: "c", Owner: owner, CreatedAt: time.Now()}, store.Limits{}); err != nil {
		b.Fatal(err)
	}
	acc := store.Event{Seq: 1, Type: gen.EventTypeAccepted, Data: []byte(`{"seq":1,"type":"accepted"}`)}
	if _, err := m.CreateTicket(ctx, store.NewTicket{ID: "t", ConversationID: "c", Owner: owner, CreatedAt: time.Now(), Accepted: acc}, store.Limits{}); err != nil {
		b.Fatal(err)
	}
	for seq := int64(2); seq <= int64(n); seq++ {
		if err := m.Append(ctx, "t", benchEvent(seq)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppend is one event appended to a running ticket's log: below the bound, and at
// the bound, where every append evicts the oldest step.
func BenchmarkAppend(b *testing.B) {
	for _, tc := range []struct {
		name      string
		maxEvents int
	}{
		{"retained", 1 << 30},
		{"evicting-at-1000", 1000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := store.NewMemory(store.MemoryOptions{MaxEvents: tc.maxEvents})
			defer m.Close()
			start := min(tc.maxEvents, 1000)
			benchTicket(b, m, start)
			ev := benchEvent(0)
			ctx := context.Background()
			seq := int64(start)
			b.ReportAllocs()
			for b.Loop() {
				seq++
				ev.Seq = seq
				if err := m.Append(ctx, "t", ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRead is a reader's Read of a 1000-event log: the whole log (a replay from 0) and
// only the last event (a live reader that is keeping up).
func BenchmarkRead(b *testing.B) {
	for _, after := range []int64{0, 999} {
		b.Run(fmt.Sprintf("after-%d", after), func(b *testing.B) {
			m := store.NewMemory(store.MemoryOptions{MaxEvents: 1000})
			defer m.Close()
			benchTicket(b, m, 1000)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				batch, err := m.Read(ctx, "t", after)
				if err != nil {
					b.Fatal(err)
				}
				if got, want := len(batch.Events), int(1000-after); got != want {
					b.Fatalf("read %d events, want %d", got, want)
				}
			}
		})
	}
}
