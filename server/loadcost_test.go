package server_test

import (
	"crypto/rand"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestRedisLoadCost measures what asks at concurrency 64 cost on the Redis path, the way the
// time-to-ticket benchmark puts them but without its noise: the HTTP side goes through an
// in-memory transport (no syscalls of its own), so the service's read and write syscalls
// (/proc/self/io) are the store's, and redis-server's are read from its /proc/<pid>/io; CPU
// from getrusage and INFO cpu, with INFO commandstats per command. A measurement, not a check:
// it runs only with ASK_REDIS_LOAD set to the number of asks (e.g. ASK_REDIS_LOAD=8000 go test
// ./server -run TestRedisLoadCost -v), and logs per-ask figures to compare two trees by;
// ASK_LOAD_STORE=memory puts the same load on the in-memory store instead, for the service's
// own share. docs/bench/FINDINGS.md has what it showed.
func TestRedisLoadCost(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("ASK_REDIS_LOAD"))
	if n <= 0 {
		t.Skip("a measurement: set ASK_REDIS_LOAD to the number of asks")
	}
	srv := redistest.Start(t)
	info := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = info.Close() })
	st, err := redisstore.New(t.Context(), redisstore.Options{URL: srv.URL, Prefix: "load:" + rand.Text() + ":"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var ended atomic.Int64
	allEnded := make(chan struct{})
	var stOpt store.Store = st
	if os.Getenv("ASK_LOAD_STORE") == "memory" { // the same load on the in-memory store, for the service's share
		stOpt = nil
	}
	h := newHarness(t, server.Options{Store: stOpt, Runner: stepsRunner(0), MaxInFlight: 1 << 20, MaxTickets: 1 << 22,
		MaxConversationsPerID: 1 << 22, MaxRetainedPerID: 1 << 22,
		Hooks: server.Hooks{Ended: func(string, server.End) {
			if ended.Add(1) == int64(n) {
				close(allEnded)
			}
		}}})
	convs := make([]string, n)
	var made sync.WaitGroup
	for w := range 64 { // untimed, but in parallel: sequential, it took longer than the load
		made.Go(func() {
			for i := w; i < n; i += 64 {
				convs[i] = h.conv(alice)
			}
		})
	}
	made.Wait()
	redistest.Configure(t, info, os.Getenv("ASK_LOAD_REDIS_CONFIG")) // e.g. "stream-node-max-bytes 1024": a server setting's effect
	pid := redisPID(t, info)
	var wg sync.WaitGroup
	const workers = 64
	next := make(chan string)
	sv0, rv0, cpu0, rcpu0, stats0 := procIO(t, "self"), procIO(t, pid), redistest.SelfCPU(), redistest.CPU(t, info), redistest.CommandStats(t, info)
	mem0 := usedMemory(t, info)
	defer redistest.ProfileCPU(t, os.Getenv("ASK_LOAD_PROFILE"))() // a CPU profile of the load alone, the setup left out
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for cid := range next {
				if r := h.askRaw(alice, cid, "How many sev1 incidents did we have in 2026-Q2?"); r.StatusCode() != http.StatusAccepted {
					t.Errorf("ask: %d %s", r.StatusCode(), r.Body)
				}
			}
		})
	}
	for _, cid := range convs {
		next <- cid
	}
	close(next)
	wg.Wait()
	// The runs end after their tickets: wait until every one has.
	select {
	case <-allEnded:
	case <-time.After(time.Minute):
		t.Fatalf("%d of %d runs ended within a minute", ended.Load(), n)
	}
	took := time.Since(start)
	sv1, rv1, cpu1, rcpu1, stats1 := procIO(t, "self"), procIO(t, pid), redistest.SelfCPU(), redistest.CPU(t, info), redistest.CommandStats(t, info)
	f := float64(n)
	t.Logf("%d asks at concurrency %d in %v (%.0f asks/s)", n, workers, took.Round(time.Millisecond), f/took.Seconds())
	t.Logf("service:      %.2f read + %.2f write syscalls per ask, %.1f µs CPU per ask (the in-process client and logs included)",
		float64(sv1[0]-sv0[0])/f, float64(sv1[1]-sv0[1])/f, float64((cpu1-cpu0).Microseconds())/f)
	t.Logf("redis-server: %.2f read + %.2f write syscalls per ask, %.1f µs CPU per ask",
		float64(rv1[0]-rv0[0])/f, float64(rv1[1]-rv0[1])/f, float64((rcpu1-rcpu0).Microseconds())/f)
	t.Logf("redis-server: %.0f bytes of memory used per ask (used_memory, the ticket, its log and its conversation's turn kept)", float64(usedMemory(t, info)-mem0)/f)
	var calls, usec float64
	for name, v := range stats1 {
		if name == "info" {
			continue
		}
		calls += v[0] - stats0[name][0]
		usec += v[1] - stats0[name][1]
	}
	t.Logf("redis-server: %.1f commands per ask, %.1f µs in commands per ask (commandstats, a script's inner commands counted in it and again on their own)", calls/f, usec/f)
	for name, v := range stats1 {
		if d := v[0] - stats0[name][0]; d > 0 && name != "info" {
			t.Logf("  %-16s %6.2f calls/ask %7.2f µs/ask", name, d/f, (v[1]-stats0[name][1])/f)
		}
	}
}

// procIO is syscr and syscw of /proc/<pid>/io.
func procIO(t *testing.T, pid string) [2]int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/io")
	if err != nil {
		t.Skipf("no /proc io accounting: %v", err)
	}
	var out [2]int64
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch k {
		case "syscr":
			out[0] = n
		case "syscw":
			out[1] = n
		}
	}
	return out
}

func redisPID(t *testing.T, c *goredis.Client) string {
	t.Helper()
	v := redistest.Info(t, c, "server", "process_id")
	if v == "" {
		t.Fatal("INFO server has no process_id")
	}
	return v
}

// usedMemory is used_memory of INFO memory.
func usedMemory(t *testing.T, c *goredis.Client) int64 {
	t.Helper()
	n, err := strconv.ParseInt(redistest.Info(t, c, "memory", "used_memory"), 10, 64)
	if err != nil {
		t.Fatalf("INFO memory's used_memory: %v", err)
	}
	return n
}
