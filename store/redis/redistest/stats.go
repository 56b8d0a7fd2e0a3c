package redistest

import (
	"context"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

// CPU is c's server's CPU time so far (INFO cpu: used_cpu_user + used_cpu_sys), to divide
// deltas of by the work done between two reads. It fails tb when the server does not answer.
func CPU(tb testing.TB, c goredis.UniversalClient) time.Duration {
	tb.Helper()
	s, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var total time.Duration
	for line := range strings.SplitSeq(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, _ := strconv.ParseFloat(v, 64)
			total += time.Duration(f * 1e9)
		}
	}
	return total
}

// SelfCPU is the calling process's CPU time so far (getrusage: user + system), the client
// side to set beside CPU.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ProfileCPU writes a CPU profile of what follows to path, unless it is "" (a measurement's
// own work, its setup left out): the function it returns stops it.
func ProfileCPU(tb testing.TB, path string) (stop func()) {
	tb.Helper()
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		tb.Fatal(err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }
}

// Info is one field of an INFO section ("" when the section has no such field).
func Info(tb testing.TB, c goredis.UniversalClient, section, field string) string {
	tb.Helper()
	s, err := c.Info(context.Background(), section).Result()
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.SplitSeq(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// Configure sets one server setting, spelled "name value" (an environment variable's value, to
// measure the setting's effect: "stream-node-max-bytes 4096"), with CONFIG SET; "" sets
// nothing. It fails tb when the server refuses it.
func Configure(tb testing.TB, c goredis.UniversalClient, setting string) {
	tb.Helper()
	if setting == "" {
		return
	}
	k, v, _ := strings.Cut(setting, " ")
	if err := c.ConfigSet(context.Background(), k, v).Err(); err != nil {
		tb.Fatal(err)
	}
}
