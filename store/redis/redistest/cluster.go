package redistest

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/das-ask/ask/internal/redisserver"
)

// Cluster is a running Redis Cluster (see redisserver.RunCluster).
type Cluster = redisserver.Cluster

// StartCluster starts a Redis Cluster of primaries primaries (at least 3) with replicasPer
// replicas each for tb, and stops it when tb's test ends. It skips tb when redis-server or
// redis-cli is not installed.
func StartCluster(tb testing.TB, primaries, replicasPer int) *Cluster {
	tb.Helper()
	for _, bin := range []string{redisserver.Binary, redisserver.CLI} {
		if _, err := exec.LookPath(bin); err != nil {
			tb.Skipf("%s not installed (apt-get install -y redis-server, which brings redis-tools): the Redis store is tested against a real cluster", bin)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := redisserver.RunCluster(ctx, tb.TempDir(), primaries, replicasPer)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Stop() })
	return c
}
