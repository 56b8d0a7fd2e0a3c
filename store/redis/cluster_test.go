package redis_test

import (
	"crypto/rand"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/seal"
	"github.com/das-ask/ask/store/storetest"
)

// TestContractCluster runs the store contract, sealed and not, and the outbox's, on a real
// three-primary Redis Cluster, through the store's own redis+cluster:// URL, with the default
// buckets (16, spread over the primaries' slots). Redis Cluster itself refuses a script or
// transaction whose keys span slots (CROSSSLOT), and the slot hook checks the same of every
// call as the client sends it.
func TestContractCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t, 3, 0)
	url := "redis+cluster://" + strings.Join(c.Addrs(), ",")
	var h slotHook
	open := func(t *testing.T, o redisstore.Options) *redisstore.Store {
		cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs()})
		cc.AddHook(&h)
		t.Cleanup(func() { _ = cc.Close() })
		o.Client, o.Prefix = cc, "cl:"+rand.Text()+":"
		s, err := redisstore.New(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if s.Buckets() != redisstore.DefaultClusterBuckets {
			t.Fatalf("buckets on a cluster: %d, want %d", s.Buckets(), redisstore.DefaultClusterBuckets)
		}
		return s
	}
	t.Run("URL", func(t *testing.T) {
		s, err := redisstore.New(t.Context(), redisstore.Options{URL: url, Prefix: "url:" + rand.Text() + ":"})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if s.Buckets() != redisstore.DefaultClusterBuckets {
			t.Errorf("buckets through the URL: %d", s.Buckets())
		}
		g1, err := s.Generation(t.Context())
		g2, err2 := s.Generation(t.Context())
		if err != nil || err2 != nil || g1 == "" || g1 != g2 {
			t.Errorf("generation on a cluster: %q %v, %q %v", g1, err, g2, err2)
		}
	})
	t.Run("Contract", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T, o storetest.Options) store.Store {
			return open(t, redisstore.Options{MaxEvents: o.MaxEvents})
		})
	})
	t.Run("ContractSealed", func(t *testing.T) {
		keys, err := seal.ParseKeys(seal.NewKey("k1"))
		if err != nil {
			t.Fatal(err)
		}
		storetest.Run(t, func(t *testing.T, o storetest.Options) store.Store {
			return open(t, redisstore.Options{MaxEvents: o.MaxEvents, Seal: keys})
		})
	})
	t.Run("Outbox", func(t *testing.T) { storetest.Outbox(t, open(t, redisstore.Options{})) })
	t.Run("Lapsed", func(t *testing.T) {
		s := open(t, redisstore.Options{})
		if _, err := s.Lapsed(t.Context(), 10); err != nil {
			t.Fatal(err)
		}
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.errs {
		t.Error(e)
	}
}
