package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// fullMargin is how far below the memory in use Fill leaves maxmemory.
const fullMargin = 1 << 20

// Fill makes srv full, as a Redis at its maxmemory with noeviction is (docs/scale-out.md,
// "Sizing Redis"): maxmemory-policy noeviction, maxmemory just above the memory in use, then
// filler keys until Redis refuses a write with OOM, then maxmemory well below the memory in use
// (by fullMargin), so that Redis stays full while its memory moves a little (a connection
// closed frees its buffers: at the edge, a write then got through now and then, and a run
// whose lease such a write renewed was not stopped). Every write that may grow memory is then
// refused; reads, deletions and expiries go on. The returned function makes room again
// (maxmemory 0: no limit). The filler keys stay, under "redistest:fill:".
func Fill(tb testing.TB, srv *Server) (makeRoom func()) {
	tb.Helper()
	ctx := context.Background()
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	tb.Cleanup(func() { _ = c.Close() })
	if err := c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		tb.Fatal(err)
	}
	used, err := strconv.ParseInt(Info(tb, c, "memory", "used_memory"), 10, 64)
	if err != nil {
		tb.Fatalf("redistest: INFO memory's used_memory: %v", err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+2000, 10)).Err(); err != nil {
		tb.Fatal(err)
	}
	filler := strings.Repeat("x", 512)
	for i := 0; ; i++ {
		err := c.Set(ctx, "redistest:fill:"+strconv.Itoa(i), filler, 0).Err()
		if err != nil && strings.HasPrefix(err.Error(), "OOM") {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
		if i == 10000 {
			tb.Fatal("redistest: Redis took 5 MB past its maxmemory without refusing a write")
		}
	}
	used, err = strconv.ParseInt(Info(tb, c, "memory", "used_memory"), 10, 64)
	if err != nil {
		tb.Fatalf("redistest: INFO memory's used_memory: %v", err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", strconv.FormatInt(max(used-fullMargin, 1), 10)).Err(); err != nil {
		tb.Fatal(err)
	}
	return func() {
		tb.Helper()
		if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
			tb.Fatal(err)
		}
	}
}
