package redis_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// The same benchmarks as the in-memory store's (store/memory_bench_test.go), against a
// redis-server on loopback: the figures sit side by side in docs/scale-out.md.

// benchEvent is a step event of the size the service writes (about 370 bytes of JSON).
func benchEvent(seq int64) store.Event {
	data := []byte(`{"seq":` + strconv.FormatInt(seq, 10) + `,"ticket":"t_BENCHBENCHBENCHBENCHBENCHBE","conversation_id":"c_BENCHBENCHBENCHBENCHBENCHBE","ts":"2026-11-29T21:00:00.123456789Z","type":"step","args":{"sql":"SELECT COUNT(*) AS sev1_incidents FROM incidents WHERE severity = 'sev1' AND quarter = '2026-Q2'"},"call_id":"call_100000","ms":12,"refused":false,"source":"demo","tool":"run_query"}`)
	return store.Event{Seq: seq, Type: gen.EventTypeStep, Data: data}
}

// benchStore opens a store under a fresh prefix with a running ticket "t" whose log holds
// accepted and then n-1 steps.
func benchStore(b *testing.B, srv *redistest.Server, maxEvents, n int) *redisstore.Store {
	b.Helper()
	ctx := context.Background()
	s, err := redisstore.New(ctx, redisstore.Options{URL: srv.URL, Prefix: "bench:" + rand.Text() + ":", MaxEvents: maxEvents})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	owner := store.Owner{Tenant: "bench", OID: "bench"}
	if err := s.CreateConversation(ctx, store.Conversation{ID: "c", Owner: owner, CreatedAt: time.Now()}, store.Limits{}); err != nil {
		b.Fatal(err)
	}
	acc := store.Event{Seq: 1, Type: gen.EventTypeAccepted, Data: []byte(`{"seq":1,"type":"accepted"}`)}
	if _, err := s.CreateTicket(ctx, store.NewTicket{ID: "t", ConversationID: "c", Owner: owner, CreatedAt: time.Now(), Accepted: acc}, store.Limits{}); err != nil {
		b.Fatal(err)
	}
	for seq := int64(2); seq <= int64(n); seq++ {
		if err := s.Append(ctx, "t", benchEvent(seq)); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkAppend is one event appended to a running ticket's log (one script call: the seq
// check, the XADD, the step index and, at the bound, the eviction, and the notification).
func BenchmarkAppend(b *testing.B) {
	srv := redistest.Start(b)
	for _, tc := range []struct {
		name      string
		maxEvents int
	}{
		{"retained", 1 << 30},
		{"evicting-at-1000", 1000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			start := min(tc.maxEvents, 1000)
			s := benchStore(b, srv, tc.maxEvents, start)
			ev := benchEvent(0)
			ctx := context.Background()
			seq := int64(start)
			b.ReportAllocs()
			for b.Loop() {
				seq++
				ev.Seq = seq
				if err := s.Append(ctx, "t", ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRead is a reader's Read of a 1000-event log: the whole log (a replay from 0) and
// only the last event (a live reader that is keeping up).
func BenchmarkRead(b *testing.B) {
	srv := redistest.Start(b)
	for _, after := range []int64{0, 999} {
		b.Run(fmt.Sprintf("after-%d", after), func(b *testing.B) {
			s := benchStore(b, srv, 1000, 1000)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				batch, err := s.Read(ctx, "t", after)
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

// BenchmarkCreateTicket is admission: the conversation, owner and capacity checks, the
// ticket, its accepted event and its lease, in one script call.
func BenchmarkCreateTicket(b *testing.B) {
	srv := redistest.Start(b)
	s := benchStore(b, srv, 1000, 1)
	ctx := context.Background()
	owner := store.Owner{Tenant: "bench", OID: "bench"}
	acc := store.Event{Seq: 1, Type: gen.EventTypeAccepted, Data: []byte(`{"seq":1,"type":"accepted"}`)}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		cid, tid := "c"+strconv.Itoa(i), "t"+strconv.Itoa(i)
		if err := s.CreateConversation(ctx, store.Conversation{ID: cid, Owner: owner}, store.Limits{}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.CreateTicket(ctx, store.NewTicket{ID: tid, ConversationID: cid, Owner: owner, Accepted: acc}, store.Limits{MaxTickets: 1 << 30}); err != nil {
			b.Fatal(err)
		}
	}
}
