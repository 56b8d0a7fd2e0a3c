package redis_test

import (
	"errors"
	"testing"

	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/storetest"
)

// Runner names the instance that created the ticket, read by any instance on the same Redis.
func TestRunner(t *testing.T) {
	srv := redistest.Start(t)
	const prefix = "runner:"
	a := newStore(t, srv, redisstore.Options{Prefix: prefix, Replica: "replica-a"})
	b := newStore(t, srv, redisstore.Options{Prefix: prefix, Replica: "replica-b"})
	storetest.MustConv(t, a, "c", storetest.Alice)
	if _, err := storetest.NewTicket(t, a, "t", "c", storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*redisstore.Store{a, b} {
		if got, err := s.Runner(t.Context(), "t"); err != nil || got != "replica-a" {
			t.Errorf("%s: Runner(t) = %q, %v; want replica-a", s.Replica(), got, err)
		}
	}
	if _, err := b.Runner(t.Context(), "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Runner(unknown) = %v, want ErrNotFound", err)
	}
}
