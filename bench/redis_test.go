package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/das-ask/ask/store/redis/redistest"
)

// redisSizes are tiny sizes for the workloads that have Redis rows.
var redisSizes = sizes{
	ticket:   ticketOptions{Levels: []int{1, 4}, Requests: 40, Rounds: 2},
	delivery: deliveryOptions{Readers: []int{1, 3}, Events: func(int) int { return 50 }, Rounds: 1},
	replay:   2,
}

// TestRunRedisInProcess runs the three workloads against the in-memory and the Redis store and
// checks that the Redis rows are there, each with its baseline, beside the memory ones.
func TestRunRedisInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a redis-server and the suite's servers")
	}
	if _, err := exec.LookPath(redistest.Binary); err != nil {
		t.Skipf("%s not installed (apt-get install -y redis-server)", redistest.Binary)
	}
	dir := t.TempDir()
	sz := redisSizes
	r, err := Run(t.Context(), RunOptions{
		Out: dir, ModuleDir: "..", NoMicro: true, inProcess: true, sizes: &sz,
		Only: redisWorkloads, Redis: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Errors) > 0 {
		t.Fatalf("workloads failed: %v", r.Errors)
	}
	rr := r.Redis
	if rr == nil || rr.Skipped != "" || rr.Server == "" {
		t.Fatalf("redis: %+v, want figures and the server's version", rr)
	}
	if len(rr.TimeToTicket) != 2 || len(r.TimeToTicket) != 2 {
		t.Errorf("time to ticket: %d memory and %d redis levels, want 2 each", len(r.TimeToTicket), len(rr.TimeToTicket))
	}
	for _, l := range rr.TimeToTicket {
		if l.Ours.N == 0 || l.Bare.N == 0 || l.RatioP50 <= 0 {
			t.Errorf("redis time to ticket at %d: %+v", l.Concurrency, l)
		}
		// The in-memory side of the same rounds: as many asks as ours, a ratio per round.
		if v := l.VsMemory; v == nil || v.Memory.N != l.Ours.N || v.RatioP50.Rounds != sz.ticket.Rounds || v.RatioP50.Median <= 0 || v.MemoryCPUUS <= 0 {
			t.Errorf("redis time to ticket at %d beside memory: %+v, want %d asks in %d rounds", l.Concurrency, v, l.Ours.N, sz.ticket.Rounds)
		}
	}
	for _, l := range r.TimeToTicket {
		if l.VsMemory != nil {
			t.Errorf("the in-memory row at %d has an in-memory side of its own: %+v", l.Concurrency, l.VsMemory)
		}
	}
	if len(rr.Delivery) != 2 {
		t.Errorf("redis delivery: %d levels, want 2", len(rr.Delivery))
	}
	for _, l := range rr.Delivery {
		if l.Ours <= 0 || l.Bare <= 0 || l.Ratio <= 0 {
			t.Errorf("redis delivery to %d: %+v", l.Readers, l)
		}
	}
	if rr.Replay == nil || rr.Replay.Events != 1000 || rr.Replay.Ours.N != 2 || rr.Replay.Bare.N != 2 {
		t.Errorf("redis replay: %+v", rr.Replay)
	}
	md, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| redis | 4 |", "| memory | 4 |", "| redis | 3 | 50 |", "| memory | 3 | 50 |", "a redis-server " + rr.Server, "measured in the same rounds"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("REPORT.md lacks %q", want)
		}
	}
	if !strings.Contains(r.RedisSummary(), "replay p50") {
		t.Errorf("RedisSummary = %q", r.RedisSummary())
	}
}

// TestRunRedisClusterInProcess runs the three workloads on a three-primary Redis Cluster and
// checks that its rows are there, each with its baseline, beside the memory ones, with targets.
func TestRunRedisClusterInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster and the suite's servers")
	}
	for _, bin := range []string{redistest.Binary, "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed (apt-get install -y redis-server redis-tools)", bin)
		}
	}
	dir := t.TempDir()
	sz := redisSizes
	r, err := Run(t.Context(), RunOptions{
		Out: dir, ModuleDir: "..", NoMicro: true, inProcess: true, sizes: &sz,
		Only: redisWorkloads, RedisCluster: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Errors) > 0 {
		t.Fatalf("workloads failed: %v", r.Errors)
	}
	rc := r.RedisCluster
	if rc == nil || rc.Skipped != "" || rc.Server == "" || rc.Primaries != 3 || r.Redis != nil {
		t.Fatalf("redis cluster: %+v (single: %+v), want figures on 3 primaries and no single-primary rows", rc, r.Redis)
	}
	// Only the levels the targets name (1 and 64, 1 and 100) that the sizes hold: 1 here.
	if len(rc.TimeToTicket) != 1 || rc.TimeToTicket[0].Concurrency != 1 || len(rc.Delivery) != 1 || rc.Delivery[0].Readers != 1 {
		t.Errorf("cluster rows: ticket %+v, delivery %+v; want concurrency 1 and 1 reader only", rc.TimeToTicket, rc.Delivery)
	}
	for _, l := range rc.TimeToTicket {
		if l.Ours.N == 0 || l.Bare.N == 0 || l.RatioP50 <= 0 {
			t.Errorf("cluster time to ticket at %d: %+v", l.Concurrency, l)
		}
	}
	for _, l := range rc.Delivery {
		if l.Ours <= 0 || l.Bare <= 0 {
			t.Errorf("cluster delivery to %d: %+v", l.Readers, l)
		}
	}
	if rc.Replay == nil || rc.Replay.Events != 1000 || rc.Replay.Ours.N != 2 {
		t.Errorf("cluster replay: %+v", rc.Replay)
	}
	md, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`\| redis-cluster \| 1 \| [0-9.]+ ms \|`, `\| redis-cluster \| 1 \| 50 \|`, `\| redis-cluster: replay \|`, `a Redis Cluster of 3 primaries`} {
		if !regexp.MustCompile(want).Match(md) {
			t.Errorf("REPORT.md lacks %s", want)
		}
	}
	if !strings.Contains(r.RedisClusterSummary(), "replay p50") {
		t.Errorf("RedisClusterSummary = %q", r.RedisClusterSummary())
	}
}

// TestRunRedisNotInstalled: without redis-server on PATH the memory figures are measured and
// the report says why the Redis rows are missing, without failing the run.
func TestRunRedisNotInstalled(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	dir := t.TempDir()
	sz := redisSizes
	r, err := Run(t.Context(), RunOptions{
		Out: dir, ModuleDir: "..", NoMicro: true, inProcess: true, sizes: &sz,
		Only: []string{"replay"}, Redis: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Errors) > 0 {
		t.Fatalf("workloads failed: %v", r.Errors)
	}
	if r.Replay == nil || r.Replay.Ours.N != 2 {
		t.Errorf("replay: %+v", r.Replay)
	}
	if r.Redis == nil || r.Redis.Skipped != redisSkippedNotFound || r.Redis.Replay != nil {
		t.Fatalf("redis: %+v, want skipped", r.Redis)
	}
	md, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(md), "| redis | skipped: redis-server not found"); got != 3 {
		t.Errorf("REPORT.md has %d skipped rows, want 3 (one per table):\n%s", got, md)
	}
	if got := r.RedisSummary(); got != redisSkippedNotFound {
		t.Errorf("RedisSummary = %q", got)
	}
}

// TestRunRedisOff: without RunOptions.Redis there is no Redis section at all.
func TestRunRedisOff(t *testing.T) {
	sz := redisSizes
	r, err := Run(t.Context(), RunOptions{
		Out: t.TempDir(), ModuleDir: "..", NoMicro: true, inProcess: true, sizes: &sz, Only: []string{"replay"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Redis != nil || r.RedisSummary() != "" {
		t.Errorf("redis: %+v, want none", r.Redis)
	}
}

// TestStoreTables: memory and redis rows are paired by level, a Redis level without a memory
// one still shows, and the replay table has a row per store.
func TestStoreTables(t *testing.T) {
	r := &Report{
		TimeToTicket: []TicketLevel{{Concurrency: 1}, {Concurrency: 64}},
		Delivery:     []DeliveryLevel{{Readers: 1, Events: 10}},
		Replay:       &Replay{Events: 1000, Ours: Latency{P50: 1}, Bare: Latency{P50: 0.5}, RatioP50: 2},
		Redis: &RedisRun{
			Server:       "7.0.15",
			TimeToTicket: []TicketLevel{{Concurrency: 1}, {Concurrency: 64}},
			Delivery:     []DeliveryLevel{{Readers: 1, Events: 10}, {Readers: 100, Events: 20}},
			Replay:       &Replay{Events: 1000, Ours: Latency{P50: 3}, Bare: Latency{P50: 0.5}, RatioP50: 6},
		},
	}
	md := r.markdown("")
	order := func(prefixes ...string) {
		t.Helper()
		last := -1
		for _, s := range prefixes {
			i := strings.Index(md, s)
			if i < 0 {
				t.Errorf("the report lacks %q", s)
				return
			}
			if i < last {
				t.Errorf("%q is out of order", s)
			}
			last = i
		}
	}
	order("| memory | 1 | 0.000 ms", "| redis | 1 | 0.000 ms", "| memory | 64 |", "| redis | 64 |")
	order("| memory | 1 | 10 |", "| redis | 1 | 10 |", "| redis | 100 | 20 |")
	order("| memory | 1.00 ms | 0.50 ms | 2.00× |", "| redis | 3.00 ms | 0.50 ms | 6.00× |")
	if strings.Contains(md, "skipped") {
		t.Error("a report with Redis figures says skipped")
	}
	if strings.Contains(md, "nice") {
		t.Error("a report at the default priority speaks of a nice value")
	}
	// A run at another priority says so, and a refused one that it ran at the default.
	r.Redis.Nice = -10
	if md := r.markdown(""); !strings.Contains(md, "main threads ran at nice -10** (`-redis-nice -10`") {
		t.Errorf("a run at nice -10 does not say so:\n%s", md)
	}
	r.Redis.Nice, r.Redis.NiceRefused = 0, "setpriority(-10) on redis-server pid 1: permission denied"
	if md := r.markdown(""); !strings.Contains(md, "`-redis-nice` was refused (setpriority(-10) on redis-server pid 1: permission denied): its redis-servers ran at the default priority") {
		t.Errorf("a refused priority is not reported:\n%s", md)
	}
	r.Redis.NiceRefused = ""

	// The cluster's rows follow the single primary's at each level, and its targets are
	// judged against the same in-memory figures.
	r.RedisCluster = &RedisRun{
		Server: "7.0.15", Primaries: 3,
		TimeToTicket: []TicketLevel{{Concurrency: 64, Ours: Latency{P50: 3}}},
		Delivery:     []DeliveryLevel{{Readers: 1, Events: 10, Ours: 1}},
		Replay:       &Replay{Events: 1000, Ours: Latency{P50: 4}, Bare: Latency{P50: 0.5}, RatioP50: 8},
	}
	r.TimeToTicket[1].Ours.P50 = 2
	r.Delivery[0].Ours = 4
	r.Targets = targets(r)
	md = r.markdown("")
	order("| memory | 64 |", "| redis | 64 |", "| redis-cluster | 64 |")
	order("| memory | 1 | 10 |", "| redis | 1 | 10 |", "| redis-cluster | 1 | 10 |", "| redis | 100 | 20 |")
	order("| memory | 1.00 ms", "| redis | 3.00 ms", "| redis-cluster | 4.00 ms | 0.50 ms | 8.00× |")
	order("a Redis Cluster of 3 primaries")
	got := map[string]string{}
	for _, tg := range r.Targets {
		if strings.HasPrefix(tg.Name, "redis-cluster:") {
			got[tg.Name] = fmt.Sprint(tg.Met != nil && *tg.Met, " ", tg.Measured)
		}
	}
	for name, want := range map[string]string{
		"redis-cluster: time to ticket":          "true 3.000 ms vs 2.000 ms: 1.50×",
		"redis-cluster: delivery to 1 reader(s)": "true 1 vs 4 events/s: 0.250×",
		"redis-cluster: replay":                  "false 4.00 ms vs 1.00 ms: 4.00×",
	} {
		if got[name] != want {
			t.Errorf("target %q = %q, want %q", name, got[name], want)
		}
	}
	r.RedisCluster = &RedisRun{Skipped: redisCLISkippedNotFound}
	if md := r.markdown(""); strings.Count(md, "| redis-cluster | "+redisCLISkippedNotFound) != 3 {
		t.Errorf("a skipped cluster should say so once per table:\n%s", md)
	}

	// Only Redis figures: the replay section still has its table.
	r = &Report{Redis: &RedisRun{Replay: &Replay{Events: 1000}}}
	if md := r.markdown(""); !strings.Contains(md, "| redis | 0.00 ms |") || strings.Contains(md, "| memory | 0.00 ms") {
		t.Errorf("replay with only a Redis figure:\n%s", md)
	}
}

func TestChildArgsStore(t *testing.T) {
	args := childArgs(ServeOptions{Mode: ModeSynthetic, Store: "redis://127.0.0.1:6379/0"})
	if i := slices.Index(args, "-store"); i < 0 || i+1 >= len(args) || args[i+1] != "redis://127.0.0.1:6379/0" {
		t.Errorf("childArgs = %q, want -store and the URL", args)
	}
	if args := childArgs(ServeOptions{Mode: ModeSynthetic}); slices.Contains(args, "-store") {
		t.Errorf("childArgs without a store = %q", args)
	}
}

func TestServeStoreErrors(t *testing.T) {
	if err := Serve(t.Context(), ServeOptions{Mode: ModeStack, Store: "redis://127.0.0.1:1/0"}); !errors.Is(err, errStoreMode) {
		t.Errorf("Serve(stack, store) = %v, want %v", err, errStoreMode)
	}
	// A Redis that does not answer fails Serve before it hands anything out.
	start := time.Now()
	if err := Serve(t.Context(), ServeOptions{Mode: ModeSynthetic, Store: "redis://127.0.0.1:1/0"}); err == nil {
		t.Error("Serve with an unreachable Redis succeeded")
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("Serve took %s to give up on an unreachable Redis", d)
	}
}

// TestPrioritise gives a real redis-server's main thread a nice value and reads it back from
// /proc; a refusal on any process (here one that has exited) puts every one back to the
// value it had and says why. It raises the value from the one redis-server inherited from
// the test (not 0 under `nice make test`), which needs no privilege.
func TestPrioritise(t *testing.T) {
	if _, err := exec.LookPath(redistest.Binary); err != nil {
		t.Skipf("%s not installed (apt-get install -y redis-server)", redistest.Binary)
	}
	srv := redistest.Start(t)
	pid := srv.Pid()
	niceOf := func() int {
		t.Helper()
		f, err := statFields(pid)
		if err != nil {
			t.Skipf("no /proc: %v", err)
		}
		n, err := strconv.Atoi(f[19-3]) // the nice value is field 19
		if err != nil {
			t.Fatalf("/proc/%d/stat: nice %q", pid, f[19-3])
		}
		return n
	}
	// redis-server inherits the test's own nice value: 0, or 10 under `nice -n 10 make test`.
	prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := 20 - prio // Linux's getpriority returns 20 - nice
	if base > 19-7 {
		t.Skipf("the test runs at nice %d: no room above it to raise redis-server's by 7", base)
	}
	if got := niceOf(); got != base {
		t.Fatalf("redis-server started at nice %d, want the test's own %d", got, base)
	}

	var rr RedisRun
	rr.prioritise(0, pid)
	if rr.Nice != 0 || rr.NiceRefused != "" || niceOf() != base {
		t.Fatalf("prioritise(0) changed something: %+v, nice %d", rr, niceOf())
	}
	raised := base + 5
	rr.prioritise(raised, pid)
	if rr.Nice != raised || rr.NiceRefused != "" {
		t.Fatalf("prioritise(%d): %+v", raised, rr)
	}
	if got := niceOf(); got != raised {
		t.Fatalf("redis-server at nice %d after prioritise(%d), want %d", got, raised, raised)
	}
	if !strings.Contains(summaryOf(&rr), fmt.Sprintf("redis-server at nice %d", raised)) {
		t.Errorf("summary %q does not say the nice value", summaryOf(&rr))
	}

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	var refused RedisRun
	refused.prioritise(base+7, pid, gone.Process.Pid)
	if refused.Nice != 0 || !strings.Contains(refused.NiceRefused, fmt.Sprintf("setpriority(%d)", base+7)) {
		t.Fatalf("prioritise on an exited process: %+v, want it refused", refused)
	}
	if got := niceOf(); got != raised {
		t.Errorf("redis-server left at nice %d after a refusal, want %d (every process back to what it had)", got, raised)
	}
	if !strings.Contains(summaryOf(&refused), "at the default priority") {
		t.Errorf("summary %q does not say the priority was refused", summaryOf(&refused))
	}

	// Pid 0, a node not running, is refused, not taken for the benchmark's own thread.
	self, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	var none RedisRun
	none.prioritise(3, 0)
	if none.Nice != 0 || !strings.Contains(none.NiceRefused, "pid 0") {
		t.Errorf("prioritise on pid 0: %+v, want it refused", none)
	}
	if after, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0); err != nil || after != self {
		t.Errorf("the test's own priority moved from %d to %d (%v)", self, after, err)
	}
}
