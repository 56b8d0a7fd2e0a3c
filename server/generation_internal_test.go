package server

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/store"
)

// generational is a store in memory that reports a generation, as a shared store does, and
// fails to when told (a stalled or restarting Redis).
type generational struct {
	store.Store
	gen    string
	failed atomic.Bool
}

func (g *generational) Generation(context.Context) (string, error) {
	if g.failed.Load() {
		return "", store.ErrUnavailable
	}
	return g.gen, nil
}

// TestIDsMintedThroughAStallCarryTheGeneration: an id minted while the store does not answer
// its generation carries the generation last read, however long ago; without one, a ticket
// created through a stall (a keyed create waits it out) and then lost with a restart of its
// store was never told lost, and its owner read a plain 404 where the replica running it was
// about to restore it ended (an independent chaos driver, with Redis's replies held 10 s and
// then Redis restarted). A replica that has never read the generation mints nothing: the
// create fails as the store did.
func TestIDsMintedThroughAStallCarryTheGeneration(t *testing.T) {
	newServer := func(st store.Store) *Server {
		t.Helper()
		s, err := New(Options{Runner: ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome { return ask.Outcome{} }),
			Authenticator: noAuth{}, Store: st, ShutdownGrace: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
		return s
	}
	mem := store.NewMemory(store.MemoryOptions{})
	t.Cleanup(func() { _ = mem.Close() })
	owner := store.Owner{Tenant: "t", OID: "o"}

	st := &generational{Store: mem, gen: "G1"}
	s := newServer(st)
	id, err := s.newID(t.Context(), "t", owner)
	if err != nil || !strings.HasPrefix(id, "t_G1-") {
		t.Fatalf("minted %q (%v), want t_G1-…", id, err)
	}
	// The cached generation is long past its generationTTL, and the store does not answer.
	s.gen.Store(&cachedGeneration{gen: "G1", at: time.Now().Add(-time.Hour)})
	st.failed.Store(true)
	for _, kind := range []string{"t", "c"} {
		id, err := s.newID(t.Context(), kind, owner)
		if err != nil || !strings.HasPrefix(id, kind+"_G1-") {
			t.Errorf("minted through the stall: %q (%v), want %s_G1-…", id, err, kind)
		}
		// Once the store has restarted into another generation, the id reads as lost.
		st.failed.Store(false)
		st.gen = "G2"
		if !s.lostID(t.Context(), id) {
			t.Errorf("%s, minted in G1, is not told lost in G2", id)
		}
		st.gen = "G1"
		s.gen.Store(&cachedGeneration{gen: "G1", at: time.Now().Add(-time.Hour)})
		st.failed.Store(true)
	}

	fresh := newServer(&generational{Store: mem, gen: "G1"})
	fresh.store.(*generational).failed.Store(true)
	if id, err := fresh.newID(t.Context(), "t", owner); err == nil {
		t.Errorf("a replica that never read the generation minted %q through the stall, want the store's failure", id)
	}
}
