package store_test

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/store/storetest"
)

// TestEvictionMatchesModel drives long logs through many evictions and compactions and checks
// every read, from random cursors, against a model that deletes the oldest step outright.
func TestEvictionMatchesModel(t *testing.T) {
	for _, tc := range []struct {
		name      string
		maxEvents int
		stepShare float64 // how many of the appended events are steps
	}{
		{"mostly steps", 8, 0.9},
		{"half steps", 16, 0.5},
		{"few steps", 8, 0.1},
		{"steps only", 10, 1},
		{"no steps", 8, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			rng := rand.New(rand.NewPCG(1, uint64(tc.maxEvents)))
			m := store.NewMemory(store.MemoryOptions{MaxEvents: tc.maxEvents})
			t.Cleanup(func() { _ = m.Close() })
			storetest.MustConv(t, m, "c", storetest.Alice)
			if _, err := storetest.NewTicket(t, m, "t", "c", storetest.Alice, store.Limits{}); err != nil {
				t.Fatal(err)
			}
			model := []store.Event{storetest.Ev(1, gen.EventTypeAccepted)}
			for seq := int64(2); seq <= 400; seq++ {
				typ := gen.EventTypeMilestone
				if rng.Float64() < tc.stepShare {
					typ = gen.EventTypeStep
				}
				ev := storetest.Ev(seq, typ)
				if err := m.Append(ctx, "t", ev); err != nil {
					t.Fatal(err)
				}
				if len(model) >= tc.maxEvents {
					if i := slices.IndexFunc(model, func(e store.Event) bool { return e.Type == gen.EventTypeStep }); i >= 0 {
						model = slices.Delete(model, i, i+1)
					}
				}
				model = append(model, ev)
				for range 3 {
					after := rng.Int64N(seq + 1)
					b, err := m.Read(ctx, "t", after)
					if err != nil {
						t.Fatal(err)
					}
					var want []store.Event
					for _, e := range model {
						if e.Seq > after {
							want = append(want, e)
						}
					}
					if !sameEvents(b.Events, want) {
						t.Fatalf("after seq %d, read after %d: got %v, want %v", seq, after, brief(b.Events), brief(want))
					}
				}
			}
		})
	}
}

func sameEvents(a, b []store.Event) bool {
	return slices.EqualFunc(a, b, func(x, y store.Event) bool {
		return x.Seq == y.Seq && x.Type == y.Type && string(x.Data) == string(y.Data)
	})
}

func brief(evs []store.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = strconv.FormatInt(e.Seq, 10) + string(e.Type)[:1]
	}
	return out
}
