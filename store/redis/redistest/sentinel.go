package redistest

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/das-ask/ask/internal/redisserver"
)

// Sentinel is a primary, its replica and a Redis Sentinel (see redisserver.RunSentinel).
type Sentinel = redisserver.Sentinel

// StartSentinel starts a primary, a replica and a Sentinel monitoring them for tb, and stops
// them when tb's test ends. It skips tb when redis-server is not installed.
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	if _, err := exec.LookPath(redisserver.Binary); err != nil {
		tb.Skipf("%s not installed (apt-get install -y redis-server): the Redis store is tested against a real Sentinel", redisserver.Binary)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := redisserver.RunSentinel(ctx, tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Stop() })
	return s
}
