package server_test

import (
	"context"
	"crypto/rand"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestRedisCostPerAsk measures what one ask costs the Redis store, from the POST to its done:
// round trips the replica makes (a client hook counts each command or pipeline sent) and
// commands Redis runs (INFO commandstats deltas on a private redis-server, scripts' inner
// commands included). The runner emits steps back to back, as BenchmarkDelivery's does. The
// figures go to docs/bench/FINDINGS.md; the bounds below keep them from creeping back.
func TestRedisCostPerAsk(t *testing.T) {
	for _, steps := range []int{0, 10} {
		t.Run("steps="+strconv.Itoa(steps), func(t *testing.T) {
			rt, writes, cmds := redisCostPerAsk(t, steps)
			t.Logf("per ask with %d steps: %.1f round trips (%.1f of them the run's writes), %.1f Redis commands", steps, rt, writes, cmds)
			// Creation with admission and the branch open, then one write per step, then the
			// end; a lease renewal may fall in the count now and then.
			if max := 2.5 + float64(steps); writes > max {
				t.Errorf("%.1f write round trips per ask, want at most %.0f", writes, max)
			}
			// 38 for a trivial ask (43 in FINDINGS.md's runs of record of 2026-12-02T05:06Z, 41
			// once the store-wide tickets set and the conversations' sets were no longer written
			// at creation, 38 since the end leaves the conversations' sets alone too), and 2.6
			// more per step (its XADD, the steps index, the batch's bookkeeping).
			if max := 39 + 3*float64(steps); cmds > max {
				t.Errorf("%.1f Redis commands per ask, want at most %.0f", cmds, max)
			}
		})
	}
}

func redisCostPerAsk(t *testing.T, steps int) (roundTrips, writes, commands float64) {
	srv := redistest.Start(t)
	var trips, wtrips atomic.Int64
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	c.AddHook(countHook{&trips, &wtrips})
	t.Cleanup(func() { _ = c.Close() })
	st, err := redisstore.New(t.Context(), redisstore.Options{Client: c, Prefix: "cost:" + rand.Text() + ":"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ended := make(chan string, 64)
	h := newHarness(t, server.Options{Store: st, Runner: stepsRunner(steps), MaxInFlight: 1 << 10, MaxTickets: 1 << 20,
		MaxConversationsPerID: 1 << 20, MaxRetainedPerID: 1 << 20,
		Hooks: server.Hooks{Ended: func(ticket string, e server.End) { ended <- ticket }}})
	const asks = 40
	convs := make([]string, asks)
	for i := range convs {
		convs[i] = h.conv(alice)
	}
	_ = st.Ping(t.Context()) // the generation is cached: ask it now, outside the count
	info := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = info.Close() })
	before, t0, w0 := commandCount(t, info), trips.Load(), wtrips.Load()
	stats0 := redistest.CommandStats(t, info)
	for _, cid := range convs {
		h.ask(alice, cid, "How many sev1 incidents did we have in 2026-Q2?")
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Fatal("the ask did not end")
		}
	}
	n := float64(asks)
	stats1 := redistest.CommandStats(t, info)
	for name, v := range stats1 {
		d := [2]float64{v[0] - stats0[name][0], v[1] - stats0[name][1]}
		if d[0] > 0 {
			t.Logf("  %-20s %6.2f calls/ask %7.2f usec/ask", name, d[0]/n, d[1]/n)
		}
	}
	// INFO itself is one command, counted in the second figure.
	return float64(trips.Load()-t0) / n, float64(wtrips.Load()-w0) / n, float64(commandCount(t, info)-before-1) / n
}

// commandCount is the number of commands redis-server has run (INFO commandstats).
func commandCount(t *testing.T, c *goredis.Client) int64 {
	s, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		_, rest, _ := strings.Cut(line, "calls=")
		v, _, _ := strings.Cut(rest, ",")
		k, _ := strconv.ParseInt(v, 10, 64)
		n += k
	}
	return n
}

// countHook counts round trips: each command, or pipeline, sent; and, in w, those of the
// run's writes (the scripts, and the read that names a script's keys).
type countHook struct{ n, w *atomic.Int64 }

func (countHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h countHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.n.Add(1)
		switch cmd.Name() {
		case "eval", "evalsha", "hmget":
			h.w.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h countHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}
