package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/das-ask/ask/internal/redisserver"
	redisstore "github.com/das-ask/ask/store/redis"
)

// The Redis figures: time to ticket, stream delivery and replay once more, against a child
// whose store is Redis (package store/redis) on a throwaway redis-server of the run's own, each
// beside the bare baseline measured by that child in the same run. The bare baselines use no
// store, so a Redis row's ratio says what the shared store costs on top of everything else.

// RedisRun is what the run measured with the Redis store.
type RedisRun struct {
	// Skipped says why there are no Redis figures (redis-server is not installed, or did not
	// start); empty when they were measured.
	Skipped string `json:"skipped,omitempty"`
	// Server is the redis-server's version (`redis-server --version`).
	Server       string          `json:"server,omitempty"`
	TimeToTicket []TicketLevel   `json:"time_to_ticket,omitempty"`
	Delivery     []DeliveryLevel `json:"stream_delivery,omitempty"`
	Replay       *Replay         `json:"replay,omitempty"`
}

// redisSkippedNotFound is RedisRun.Skipped when the binary is not on PATH.
const redisSkippedNotFound = "skipped: redis-server not found (apt-get install -y redis-server)"

// redisWorkloads are the workloads run once more against the Redis store.
var redisWorkloads = []string{"time-to-ticket", "stream-delivery", "replay"}

// redisDelivery sizes stream delivery on Redis: the same events per reader as in memory, in
// at most 3 rounds. Each event is a round trip to Redis (about 100 µs here, against under 5 µs
// in memory), so the memory workload's 5 rounds would take a minute, a third of `make bench`.
func redisDelivery(o deliveryOptions) deliveryOptions {
	o.Rounds = min(o.Rounds, 3)
	return o
}

// openRedisStore is a child's store when ServeOptions.Store is set: a prefix of its own (so a
// Redis shared with anything else is not disturbed), finished tickets kept an hour (the
// synthetic service's), and the service's event bound.
func openRedisStore(ctx context.Context, url string, maxEvents int) (*redisstore.Store, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return redisstore.New(dctx, redisstore.Options{
		URL: url, Prefix: "bench:" + rand.Text() + ":", MaxEvents: maxEvents, TTL: time.Hour,
	})
}

// startRedis starts a redis-server for the run (loopback, persistence off, in a temporary
// directory) and returns it with the function that stops it and removes its directory. When
// the binary is not on PATH it returns a RedisRun saying so and no server.
func startRedis(ctx context.Context) (*RedisRun, *redisserver.Server, func(), error) {
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
	return rr, srv, func() { _ = srv.Stop(); _ = os.RemoveAll(dir) }, nil
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

// redisNote is the paragraph before the tables that says what the redis rows are.
func (r *Report) redisNote(p func(string, ...any)) {
	rr := r.Redis
	if rr == nil {
		return
	}
	if rr.Skipped != "" {
		p("Sections 1, 3 and 5 have no Redis rows: %s. ", rr.Skipped)
		p("With it installed, `make bench` runs those workloads once more against the Redis store.\n\n")
		return
	}
	version := ""
	if rr.Server != "" {
		version = " " + rr.Server
	}
	p("In sections 1, 3 and 5, the rows whose store is **redis** are the same workload run once more against a child whose store is Redis (`store/redis`): ")
	p("a redis-server%s started for the run on loopback, persistence off, one per run, shared by nothing else. ", version)
	p("Each Redis row has its own bare baseline, measured by that child beside it; the baselines use no store, so the ratio says what the service costs with Redis behind it. ")
	p("The in-memory targets are judged on the in-memory store, the default; the Redis targets compare the Redis rows with the in-memory ones of the same run (different children, so not per round).\n\n")
}

// skippedRow is a table row saying the Redis rows are missing and why.
func (r *Report) skippedRow(p func(string, ...any)) {
	if r.Redis != nil && r.Redis.Skipped != "" {
		p("| redis | %s |\n", r.Redis.Skipped)
	}
}

func (r *Report) ticketTable(p func(string, ...any)) {
	p("| store | concurrency | ours p50 | bare p50 | p50 ratio: median of rounds (min–max) | ours p99 | bare p99 | ratio | server CPU/ask ours | bare | CPU ratio: median (min–max) | ours req/s | bare req/s | n (each) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	row := func(store string, l TicketLevel) {
		p("| %s | %d | %.3f ms | %.3f ms | %s | %.3f ms | %.3f ms | %.2f× | %.1f µs | %.1f µs | %s | %.0f | %.0f | %d |\n",
			store, l.Concurrency, l.Ours.P50, l.Bare.P50, l.RatioP50Spread, l.Ours.P99, l.Bare.P99, l.RatioP99,
			l.OursCPUUS, l.BareCPUUS, l.CPURatio, l.OursRPS, l.BareRPS, l.Ours.N)
	}
	var redis []TicketLevel
	if r.Redis != nil {
		redis = r.Redis.TimeToTicket
	}
	pairRows(r.TimeToTicket, redis, func(l TicketLevel) int { return l.Concurrency }, row)
	r.skippedRow(p)
}

func (r *Report) deliveryTable(p func(string, ...any)) {
	p("| store | readers | events per reader | ours events/s | bare (batching) events/s | ratio: median of rounds (min–max) | bare one-write events/s | bytes/event |\n|---|---|---|---|---|---|---|---|\n")
	row := func(store string, l DeliveryLevel) {
		p("| %s | %d | %d | %.0f | %.0f | %s | %.0f | %.0f |\n", store, l.Readers, l.Events, l.Ours, l.Bare, l.RatioSpread, l.BareBatched, l.BytesPerEvent)
	}
	var redis []DeliveryLevel
	if r.Redis != nil {
		redis = r.Redis.Delivery
	}
	pairRows(r.Delivery, redis, func(l DeliveryLevel) int { return l.Readers }, row)
	r.skippedRow(p)
}

// replayTable is section 5's table; it reports whether it wrote one.
func (r *Report) replayTable(p func(string, ...any)) bool {
	var redis *Replay
	if r.Redis != nil {
		redis = r.Redis.Replay
	}
	if r.Replay == nil && redis == nil {
		return false
	}
	events := 0
	for _, rp := range []*Replay{r.Replay, redis} {
		if rp != nil {
			events = rp.Events
		}
	}
	p("Reconnect with `Last-Event-ID: 0` to a finished ticket of %d events, to the last event. Baseline: the bare writer sending as many pre-encoded frames in one write.\n\n", events)
	p("| store | ours p50 | bare p50 | ratio | ours p99 | bare p99 | ours mean | bare mean | n (each) |\n|---|---|---|---|---|---|---|---|---|\n")
	row := func(store string, rp *Replay) {
		if rp != nil {
			p("| %s | %.2f ms | %.2f ms | %.2f× | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %d |\n",
				store, rp.Ours.P50, rp.Bare.P50, rp.RatioP50, rp.Ours.P99, rp.Bare.P99, rp.Ours.Mean, rp.Bare.Mean, rp.Ours.N)
		}
	}
	row("memory", r.Replay)
	row("redis", redis)
	r.skippedRow(p)
	p("\n")
	return true
}

// RedisSummary is the line askbench prints for the Redis rows, "" when there is nothing to say.
func (r *Report) RedisSummary() string {
	rr := r.Redis
	switch {
	case rr == nil:
		return ""
	case rr.Skipped != "":
		return rr.Skipped
	}
	var parts []string
	for _, l := range rr.TimeToTicket {
		if l.Concurrency == 64 {
			parts = append(parts, fmt.Sprintf("ticket p50 at 64 %.3f ms (%.2f× bare, CPU %.2f×)", l.Ours.P50, l.RatioP50, l.CPURatio.Median))
		}
	}
	for _, l := range rr.Delivery {
		parts = append(parts, fmt.Sprintf("%d reader(s) %.0f events/s (%.2f× bare)", l.Readers, l.Ours, l.Ratio))
	}
	if rr.Replay != nil {
		parts = append(parts, fmt.Sprintf("replay p50 %.2f ms (%.2f× bare)", rr.Replay.Ours.P50, rr.Replay.RatioP50))
	}
	return strings.Join(parts, "; ")
}

// pairRows writes each in-memory row followed by the Redis row at the same level (concurrency or
// readers), then any Redis row that had no in-memory partner.
func pairRows[L any](memory, redis []L, level func(L) int, row func(store string, l L)) {
	paired := map[int]bool{}
	for _, l := range memory {
		row("memory", l)
		for _, rl := range redis {
			if k := level(rl); k == level(l) && !paired[k] {
				row("redis", rl)
				paired[k] = true
			}
		}
	}
	for _, rl := range redis {
		if !paired[level(rl)] {
			row("redis", rl)
		}
	}
}
