package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// CommandStats is c's server's INFO commandstats: per command (lower case, as Redis names
// it), its calls and the microseconds spent in it, since the server started. It fails tb when
// the server does not answer.
func CommandStats(tb testing.TB, c goredis.UniversalClient) map[string][2]float64 {
	tb.Helper()
	s, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string][2]float64{}
	for line := range strings.SplitSeq(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var v [2]float64
		for kv := range strings.SplitSeq(rest, ",") {
			k, val, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(val, 64)
			switch k {
			case "calls":
				v[0] = f
			case "usec":
				v[1] = f
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = v
	}
	return out
}
