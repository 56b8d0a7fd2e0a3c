package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/internal/redisserver"
)

// The Redis figures: time to ticket, stream delivery and replay once more, against a child
// whose store is Redis (package store/redis) on a throwaway redis-server of the run's own, each
// beside the bare baseline measured by that child in the same run. The bare baselines use no
// store, so a Redis row's ratio says what the shared store costs on top of everything else.

// RedisRun is what the run measured with the Redis store, on one redis-server (Report.Redis)
// or on a Redis Cluster (Report.RedisCluster).
type RedisRun struct {
	// Skipped says why there are no Redis figures (redis-server is not installed, or did not
	// start); empty when they were measured.
	Skipped string `json:"skipped,omitempty"`
	// Server is the redis-server's version (`redis-server --version`).
	Server string `json:"server,omitempty"`
	// Primaries is the Redis Cluster's primaries (each without a replica); 0 on one
	// redis-server.
	Primaries int `json:"primaries,omitempty"`
	// Nice is the scheduling priority (nice value) each redis-server's main thread, the one
	// that runs every command, was given for the run (RunOptions.RedisNice); 0 is the
	// default. NiceRefused says why the one asked for could not be given: the figures are
	// then at the default priority.
	Nice         int             `json:"nice,omitempty"`
	NiceRefused  string          `json:"nice_refused,omitempty"`
	TimeToTicket []TicketLevel   `json:"time_to_ticket,omitempty"`
	Delivery     []DeliveryLevel `json:"stream_delivery,omitempty"`
	Replay       *Replay         `json:"replay,omitempty"`
}

// redisSkippedNotFound is RedisRun.Skipped when the binary is not on PATH;
// redisCLISkippedNotFound when redis-cli, which joins a cluster, is not.
const (
	redisSkippedNotFound    = "skipped: redis-server not found (apt-get install -y redis-server)"
	redisCLISkippedNotFound = "skipped: redis-cli not found (apt-get install -y redis-tools)"
)

// clusterPrimaries is the size of the Redis Cluster the cluster rows run on.
const clusterPrimaries = 3

// redisWorkloads are the workloads run once more against the Redis store.
var redisWorkloads = []string{"time-to-ticket", "stream-delivery", "replay"}

// redisDelivery sizes stream delivery on Redis: the same events per reader as in memory, in
// at most 3 rounds. Each event is a round trip to Redis (about 100 µs here, against under 5 µs
// in memory), so the memory workload's 5 rounds would take a minute, a third of `make bench`.
func redisDelivery(o deliveryOptions) deliveryOptions {
	o.Rounds = min(o.Rounds, 3)
	return o
}

// redisClusterSizes sizes the cluster rows: only the levels the targets name (time to ticket
// at 1 and 64, delivery to 1 and 100 readers), time to ticket in at most 5 rounds (delivery
// takes redisDelivery's 3 as the single primary's), so that the cluster adds under a minute to
// the run.
func redisClusterSizes(sz sizes) sizes {
	keep := func(levels []int, want ...int) []int {
		var out []int
		for _, l := range levels {
			if slices.Contains(want, l) {
				out = append(out, l)
			}
		}
		if len(out) == 0 {
			return levels // a test's own levels
		}
		return out
	}
	sz.ticket.Levels = keep(sz.ticket.Levels, 1, 64)
	sz.ticket.Rounds = min(sz.ticket.Rounds, 5)
	sz.delivery.Readers = keep(sz.delivery.Readers, 1, 100)
	return sz
}

// startRedis starts a redis-server for the run (loopback, persistence off, in a temporary
// directory) and returns it with the function that stops it and removes its directory. When
// the binary is not on PATH it returns a RedisRun saying so and no server.
func startRedis(ctx context.Context, nice int) (*RedisRun, *redisserver.Server, func(), error) {
	bin, err := exec.LookPath(redisserver.Binary)
	if err != nil {
		return &RedisRun{Skipped: redisSkippedNotFound}, nil, nil, nil
	}
	rr := &RedisRun{Server: redisVersion(ctx, bin)}
	dir, err := os.MkdirTemp("", "askbench-redis-")
	if err != nil {
		return rr, nil, nil, err
	}
	srv, err := redisserver.Run(ctx, dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		rr.Skipped = "skipped: redis-server did not start (see the failures)"
		return rr, nil, nil, err
	}
	rr.prioritise(nice, srv.Pid())
	return rr, srv, func() { _ = srv.Stop(); _ = os.RemoveAll(dir) }, nil
}

// startRedisCluster starts a Redis Cluster of clusterPrimaries primaries without replicas
// (loopback, persistence off, as startRedis's server: the figures differ by the topology
// only) and returns the store URL that names it, redis+cluster://seed,…, with the function
// that stops it. When redis-server or redis-cli is not on PATH it returns a RedisRun saying
// so and no URL.
func startRedisCluster(ctx context.Context, nice int) (*RedisRun, string, func(), error) {
	bin, err := exec.LookPath(redisserver.Binary)
	if err != nil {
		return &RedisRun{Skipped: redisSkippedNotFound}, "", nil, nil
	}
	if _, err := exec.LookPath(redisserver.CLI); err != nil {
		return &RedisRun{Skipped: redisCLISkippedNotFound}, "", nil, nil
	}
	rr := &RedisRun{Server: redisVersion(ctx, bin), Primaries: clusterPrimaries}
	dir, err := os.MkdirTemp("", "askbench-redis-cluster-")
	if err != nil {
		return rr, "", nil, err
	}
	c, err := redisserver.RunCluster(ctx, dir, clusterPrimaries, 0)
	if err != nil {
		_ = os.RemoveAll(dir)
		rr.Skipped = "skipped: the Redis Cluster did not start (see the failures)"
		return rr, "", nil, err
	}
	pids := make([]int, 0, len(c.Nodes))
	for _, n := range c.Nodes {
		pids = append(pids, n.Pid())
	}
	rr.prioritise(nice, pids...)
	return rr, c.URL(), func() { _ = c.Stop(); _ = os.RemoveAll(dir) }, nil
}

// prioritise gives the main thread of each process (a redis-server's, which runs every
// command; its background threads keep theirs) the nice value n, and records it, or why it
// was refused: a value below the one it started at needs CAP_SYS_NICE. On a refusal every
// process is put back to the value it had (the benchmark's own, which it inherited: under
// `nice make bench` not 0), so that the figures are all at one priority. 0 leaves them alone.
//
// Redis executes every replica's scripts on that one thread, so while it waits for a core
// every ask waits. On a machine whose cores it shares with the service and the load
// generator it is preempted hundreds of times a second at the default priority (the
// findings measure it): -redis-nice measures what an operator who co-locates Redis and
// gives it priority would see.
func (rr *RedisRun) prioritise(n int, pids ...int) {
	if n == 0 {
		return
	}
	// What each had before, to put back on a refusal. Linux's getpriority returns 20 - nice.
	was := make(map[int]int, len(pids))
	for _, pid := range pids {
		if pid > 0 {
			if prio, err := syscall.Getpriority(syscall.PRIO_PROCESS, pid); err == nil {
				was[pid] = 20 - prio
			}
		}
	}
	for _, pid := range pids {
		// PRIO_PROCESS names one thread on Linux: the process's main thread here. Pid 0 (a
		// node that is not running) would name the calling thread, the benchmark's own.
		err := error(syscall.ESRCH)
		if pid > 0 {
			err = syscall.Setpriority(syscall.PRIO_PROCESS, pid, n)
		}
		if err != nil {
			rr.NiceRefused = fmt.Sprintf("setpriority(%d) on redis-server pid %d: %v", n, pid, err)
			for p, nice := range was {
				_ = syscall.Setpriority(syscall.PRIO_PROCESS, p, nice)
			}
			return
		}
	}
	rr.Nice = n
}

// redisVersion is the "v=" field of `redis-server --version`, or "" when it cannot be read.
func redisVersion(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return ""
	}
	for f := range strings.FieldsSeq(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return ""
}

// errStoreMode is Serve's answer to a store in a mode that does not take one.
var errStoreMode = errors.New("bench: a store URL is for the synthetic mode only")

// The Markdown of the three tables that hold a row per store. p is markdown's printf.

// storeRows is one store's rows beside the in-memory ones: "redis" (one redis-server) or
// "redis-cluster" (a Redis Cluster).
type storeRows struct {
	name string
	run  *RedisRun
}

// redisStores are the report's Redis stores that it has a section for (measured or skipped).
func (r *Report) redisStores() []storeRows {
	var out []storeRows
	if r.Redis != nil {
		out = append(out, storeRows{"redis", r.Redis})
	}
	if r.RedisCluster != nil {
		out = append(out, storeRows{"redis-cluster", r.RedisCluster})
	}
	return out
}

// redisNote is the paragraph before the tables that says what the redis rows are.
func (r *Report) redisNote(p func(string, ...any)) {
	if rr := r.Redis; rr != nil {
		if rr.Skipped != "" {
			p("Sections 1, 3 and 5 have no Redis rows: %s. ", rr.Skipped)
			p("With it installed, `make bench` runs those workloads once more against the Redis store.\n\n")
		} else {
			version := ""
			if rr.Server != "" {
				version = " " + rr.Server
			}
			p("In sections 1, 3 and 5, the rows whose store is **redis** are the same workload run once more against a child whose store is Redis (`store/redis`): ")
			p("a redis-server%s started for the run on loopback, persistence off, with the settings docs/scale-out.md recommends (`%s`), one per run, shared by nothing else. ", version, strings.Join(redisserver.Tuning, " "))
			rr.niceNote(p)
			p("Each Redis row has its own bare baseline, measured by that child beside it; the baselines use no store, so the ratio says what the service costs with Redis behind it. ")
			p("The in-memory targets are judged on the in-memory store, the default. The Redis targets compare the Redis rows with the in-memory ones: time to ticket per round, against an in-memory child measured in the same rounds (section 1's second table); delivery and replay against the in-memory rows of the same run (different children, so not per round).\n\n")
		}
	}
	if rc := r.RedisCluster; rc != nil {
		if rc.Skipped != "" {
			p("There are no **redis-cluster** rows: %s.\n\n", rc.Skipped)
			return
		}
		p("The rows whose store is **redis-cluster** are the same workloads once more on a Redis Cluster of %d primaries (no replicas), ", rc.Primaries)
		p("each a redis-server with `--cluster-enabled yes` on loopback, persistence off, the same settings, joined with `redis-cli --cluster create`, the child's store URL `redis+cluster://` naming every node: ")
		p("the same machine and the same work as the single primary's, spread over three processes, so the difference is what the cluster client and the hash-tagged key layout cost or save. ")
		rc.niceNote(p)
		p("To keep the run short they measure only the levels the targets name (time to ticket at 1 and 64, delivery to 1 and 100 readers), time to ticket in at most 5 rounds. ")
		p("The cluster's targets are the single primary's, against the same in-memory figures.\n\n")
	}
}

// niceNote says at which scheduling priority the run's redis-servers ran, when not the
// default, or that the one asked for was refused.
func (rr *RedisRun) niceNote(p func(string, ...any)) {
	switch {
	case rr.NiceRefused != "":
		p("The run's `-redis-nice` was refused (%s): its redis-servers ran at the default priority. ", rr.NiceRefused)
	case rr.Nice != 0:
		p("**Its redis-servers' main threads ran at nice %d** (`-redis-nice %d`, the default is 0), as an operator who co-locates Redis with the replicas on the same cores would run them; `make bench` leaves them at the default. ", rr.Nice, rr.Nice)
	}
}

// skippedRows are the table rows saying which Redis rows are missing and why.
func (r *Report) skippedRows(p func(string, ...any)) {
	for _, st := range r.redisStores() {
		if st.run.Skipped != "" {
			p("| %s | %s |\n", st.name, st.run.Skipped)
		}
	}
}

// levelsOf is each Redis store's rows of one table: its name and the rows pick selects.
func levelsOf[L any](r *Report, pick func(*RedisRun) []L) []named[L] {
	var out []named[L]
	for _, st := range r.redisStores() {
		out = append(out, named[L]{st.name, pick(st.run)})
	}
	return out
}

type named[L any] struct {
	name string
	rows []L
}

// kbOrDash is bytes as KB with one decimal, or "—" when not measured.
func kbOrDash(b float64) string {
	if b <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f KB", b/kb)
}

func (r *Report) ticketTable(p func(string, ...any)) {
	p("| store | concurrency | ours p50 | bare p50 | p50 ratio: median of rounds (min–max) | ours p99 | bare p99 | ratio | server CPU/ask ours | bare | CPU ratio: median (min–max) | heap allocated/ask ours | bare | redis-server CPU/ask | ours req/s | bare req/s | n (each) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	row := func(store string, l TicketLevel) {
		storeCPU := "—"
		if l.StoreCPUUS > 0 {
			storeCPU = fmt.Sprintf("%.1f µs", l.StoreCPUUS)
		}
		p("| %s | %d | %.3f ms | %.3f ms | %s | %.3f ms | %.3f ms | %.2f× | %.1f µs | %.1f µs | %s | %s | %s | %s | %.0f | %.0f | %d |\n",
			store, l.Concurrency, l.Ours.P50, l.Bare.P50, l.RatioP50Spread, l.Ours.P99, l.Bare.P99, l.RatioP99,
			l.OursCPUUS, l.BareCPUUS, l.CPURatio, kbOrDash(l.OursAllocB), kbOrDash(l.BareAllocB), storeCPU, l.OursRPS, l.BareRPS, l.Ours.N)
	}
	pairRows(r.TimeToTicket, levelsOf(r, func(rr *RedisRun) []TicketLevel { return rr.TimeToTicket }), func(l TicketLevel) int { return l.Concurrency }, row)
	r.skippedRows(p)
	// The Redis rows' in-memory figure, measured beside them in the same rounds.
	var beside []string
	for _, st := range r.redisStores() {
		for _, l := range st.run.TimeToTicket {
			if v := l.VsMemory; v != nil {
				beside = append(beside, fmt.Sprintf("| %s | %d | %.3f ms | %.3f ms | %s | %.3f ms | %.3f ms | %.1f µs | %.1f µs | %.1f ms | %.1f ms | %.0f | %.0f |\n",
					st.name, l.Concurrency, l.Ours.P50, v.Memory.P50, v.RatioP50, l.Ours.P99, v.Memory.P99, l.OursCPUUS+l.StoreCPUUS, v.MemoryCPUUS, l.OursDrainMS, v.MemoryDrainMS, l.OursRPS, v.MemoryRPS))
			}
		}
	}
	if len(beside) > 0 {
		p("\nThe Redis rows against the in-memory store, measured in the same rounds: ours on an in-memory child is a third side of every round of the Redis workload (the order rotating by round), so the ratio is the median of per-round ratios like the others. CPU/ask on Redis is the service's and redis-server's together, read once a burst's runs have all ended and their ends are stored; runs ended after is how long after a burst's last 202 that was (the median of rounds): ends that kept up with the tickets, or did not.\n\n")
		p("| store | concurrency | ours p50 | in memory p50 | p50 ratio: median of rounds (min–max) | ours p99 | in memory p99 | CPU/ask ours | in memory | runs ended after: ours | in memory | ours req/s | in memory req/s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, b := range beside {
			p("%s", b)
		}
	}
}

func (r *Report) deliveryTable(p func(string, ...any)) {
	p("| store | readers | events per reader | ours events/s | bare (batching) events/s | ratio: median of rounds (min–max) | bare one-write events/s | bytes/event |\n|---|---|---|---|---|---|---|---|\n")
	row := func(store string, l DeliveryLevel) {
		p("| %s | %d | %d | %.0f | %.0f | %s | %.0f | %.0f |\n", store, l.Readers, l.Events, l.Ours, l.Bare, l.RatioSpread, l.BareBatched, l.BytesPerEvent)
	}
	pairRows(r.Delivery, levelsOf(r, func(rr *RedisRun) []DeliveryLevel { return rr.Delivery }), func(l DeliveryLevel) int { return l.Readers }, row)
	r.skippedRows(p)
}

// replayTable is section 5's table; it reports whether it wrote one.
func (r *Report) replayTable(p func(string, ...any)) bool {
	replays := []named[*Replay]{{"memory", []*Replay{r.Replay}}}
	for _, st := range r.redisStores() {
		replays = append(replays, named[*Replay]{st.name, []*Replay{st.run.Replay}})
	}
	events := 0
	for _, n := range replays {
		if rp := n.rows[0]; rp != nil {
			events = rp.Events
		}
	}
	if events == 0 {
		return false
	}
	p("Reconnect with `Last-Event-ID: 0` to a finished ticket of %d events, to the last event. Baseline: the bare writer sending as many pre-encoded frames in one write.\n\n", events)
	p("| store | ours p50 | bare p50 | ratio | ours p99 | bare p99 | ours mean | bare mean | n (each) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range replays {
		if rp := n.rows[0]; rp != nil {
			p("| %s | %.2f ms | %.2f ms | %.2f× | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %d |\n",
				n.name, rp.Ours.P50, rp.Bare.P50, rp.RatioP50, rp.Ours.P99, rp.Bare.P99, rp.Ours.Mean, rp.Bare.Mean, rp.Ours.N)
		}
	}
	r.skippedRows(p)
	p("\n")
	return true
}

// RedisSummary is the line askbench prints for the Redis rows (one redis-server), "" when
// there is nothing to say; RedisClusterSummary the same for the Redis Cluster's.
func (r *Report) RedisSummary() string        { return summaryOf(r.Redis) }
func (r *Report) RedisClusterSummary() string { return summaryOf(r.RedisCluster) }

func summaryOf(rr *RedisRun) string {
	switch {
	case rr == nil:
		return ""
	case rr.Skipped != "":
		return rr.Skipped
	}
	var parts []string
	for _, l := range rr.TimeToTicket {
		if l.Concurrency == 64 {
			parts = append(parts, fmt.Sprintf("ticket p50 at 64 %.3f ms (%.2f× bare, CPU %.2f×, redis-server %.0f µs/ask)", l.Ours.P50, l.RatioP50, l.CPURatio.Median, l.StoreCPUUS))
		}
	}
	for _, l := range rr.Delivery {
		parts = append(parts, fmt.Sprintf("%d reader(s) %.0f events/s (%.2f× bare)", l.Readers, l.Ours, l.Ratio))
	}
	if rr.Replay != nil {
		parts = append(parts, fmt.Sprintf("replay p50 %.2f ms (%.2f× bare)", rr.Replay.Ours.P50, rr.Replay.RatioP50))
	}
	switch {
	case rr.NiceRefused != "":
		parts = append(parts, "at the default priority: "+rr.NiceRefused)
	case rr.Nice != 0:
		parts = append(parts, fmt.Sprintf("redis-server at nice %d", rr.Nice))
	}
	return strings.Join(parts, "; ")
}

// pairRows writes each in-memory row followed by each other store's row at the same level
// (concurrency or readers), then any row of theirs that had no in-memory partner.
func pairRows[L any](memory []L, others []named[L], level func(L) int, row func(store string, l L)) {
	paired := make([]map[int]bool, len(others))
	for i := range others {
		paired[i] = map[int]bool{}
	}
	for _, l := range memory {
		row("memory", l)
		for i, o := range others {
			for _, ol := range o.rows {
				if k := level(ol); k == level(l) && !paired[i][k] {
					row(o.name, ol)
					paired[i][k] = true
				}
			}
		}
	}
	for i, o := range others {
		for _, ol := range o.rows {
			if !paired[i][level(ol)] {
				row(o.name, ol)
			}
		}
	}
}

// redisCPU reads the CPU time the redis-server processes of a store URL (redis://host:port/db,
// or redis+cluster://seed,… naming every primary, as startRedisCluster's) have used so far:
// used_cpu_user plus used_cpu_sys of INFO cpu, summed over the nodes. Each read opens and
// closes its own connection, so the store's own connections see nothing of it.
func redisCPU(storeURL string) func(context.Context) (time.Duration, error) {
	_, rest, _ := strings.Cut(storeURL, "://")
	host, _, _ := strings.Cut(rest, "/")
	addrs := strings.Split(host, ",")
	return func(ctx context.Context) (time.Duration, error) {
		var total time.Duration
		for _, a := range addrs {
			c := goredis.NewClient(&goredis.Options{Addr: a, Protocol: 2, MaxRetries: -1})
			info, err := c.Info(ctx, "cpu").Result()
			_ = c.Close()
			if err != nil {
				return 0, fmt.Errorf("bench: INFO cpu of %s: %w", a, err)
			}
			for line := range strings.SplitSeq(info, "\n") {
				k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
				if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
					f, err := strconv.ParseFloat(v, 64)
					if err != nil {
						return 0, fmt.Errorf("bench: INFO cpu of %s: %s: %w", a, k, err)
					}
					total += time.Duration(f * 1e9)
				}
			}
		}
		return total, nil
	}
}
