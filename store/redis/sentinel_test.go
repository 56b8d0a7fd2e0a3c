package redis_test

import (
	"crypto/rand"
	"testing"

	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/storetest"
)

// TestContractSentinel runs the store contract, and the outbox's, through a redis+sentinel://
// URL: a real Sentinel naming a real primary, which has a replica. (A failover in the middle of
// a run is server's TestSentinelFailoverMidRun.)
func TestContractSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary, a replica and a Sentinel")
	}
	sen := redistest.StartSentinel(t)
	open := func(t *testing.T, o redisstore.Options) *redisstore.Store {
		o.URL, o.Prefix = sen.URL(), "sen:"+rand.Text()+":"
		s, err := redisstore.New(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	t.Run("Contract", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, o storetest.Options) store.Store {
			return open(t, redisstore.Options{MaxEvents: o.MaxEvents})
		})
	})
	t.Run("Outbox", func(t *testing.T) { storetest.Outbox(t, open(t, redisstore.Options{})) })
}
