package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// TicketLevel is time to ticket at one concurrency: POST .../asks → 202, ours and the bare
// handler, in alternating rounds.
type TicketLevel struct {
	Concurrency int `json:"concurrency"`
	// Ours and Bare pool every counted round's latencies.
	Ours    Latency `json:"ours"`
	Bare    Latency `json:"bare"`
	OursRPS float64 `json:"ours_rps"`
	BareRPS float64 `json:"bare_rps"`
	// RatioP50 is ours / bare at p50 (lower is better; 1 is the machine's limit): the median
	// of the per-round ratios, each round's two bursts back to back, which goes first
	// alternating by round. RatioP50Spread adds the smallest and largest. RatioP99 is the
	// pooled p99s' ratio (one round's p99 is too few samples).
	RatioP50       float64 `json:"ratio_p50"`
	RatioP50Spread Spread  `json:"ratio_p50_spread"`
	RatioP99       float64 `json:"ratio_p99"`
	// OursCPUUS and BareCPUUS are the server process's CPU time per ask in µs (user plus
	// system, the median over rounds), the load generator excluded: see serverCPU and the
	// findings. CPURatio is ours / bare, the median of the per-round ratios.
	OursCPUUS float64 `json:"ours_cpu_us_per_ask"`
	BareCPUUS float64 `json:"bare_cpu_us_per_ask"`
	CPURatio  Spread  `json:"cpu_ratio"`
	// StoreCPUUS is, on the Redis rows, the redis-server processes' CPU time per ask of ours
	// (used_cpu_user plus used_cpu_sys of INFO cpu, summed over the primaries, the median over
	// rounds): the store's share of an ask, which the service's own CPU leaves out.
	StoreCPUUS float64 `json:"store_cpu_us_per_ask,omitempty"`
	// OursAllocB and BareAllocB are the server process's heap bytes allocated per ask (the
	// median over rounds; the debug endpoint's own reading is in both): what its garbage
	// collector pays for, which CPU per ask includes.
	OursAllocB float64 `json:"ours_alloc_bytes_per_ask,omitempty"`
	BareAllocB float64 `json:"bare_alloc_bytes_per_ask,omitempty"`
}

// ticketOptions size the workload.
type ticketOptions struct {
	Levels   []int // concurrencies
	Requests int   // per target per round, at least 40 per worker
	Rounds   int
}

// timeToTicket measures the 202 of createAsk, ours against the bare Echo handler behind the
// same JWT validation, through the generated client with real tokens. Every ask goes to a
// fresh conversation (created beforehand, untimed), so no ask waits on another's run.
// storeCPU, when not nil, reads the store's CPU time so far (redisCPU), for StoreCPUUS.
func timeToTicket(ctx context.Context, ch *child, o ticketOptions, storeCPU func(context.Context) (time.Duration, error)) ([]TicketLevel, error) {
	if storeCPU == nil { // the store is in the service's process: its CPU is the server's
		storeCPU = func(context.Context) (time.Duration, error) { return 0, nil }
	}
	// level is one concurrency's clients and conversations, all made before anything is timed.
	type level struct {
		c, perWorker, warm int
		hc                 *http.Client
		ours, bare         []*askAPI
		convs              [][]string
		next               []int
	}
	var levels []*level
	defer func() {
		for _, l := range levels {
			l.hc.CloseIdleConnections()
		}
	}()
	for _, c := range o.Levels {
		l := &level{c: c, perWorker: max(o.Requests/c, 40), warm: max(10, 200/c), hc: newHTTPClient(c + 4),
			ours: make([]*askAPI, c), bare: make([]*askAPI, c), convs: make([][]string, c), next: make([]int, c)}
		levels = append(levels, l)
		err := parallel(ctx, c, func(ctx context.Context, i int) error {
			tok, err := ch.token(ctx, fmt.Sprintf("bench-w%d", i))
			if err != nil {
				return err
			}
			if l.ours[i], err = newAskAPI(ch.ep.Ask, l.hc, tok); err != nil {
				return err
			}
			if l.bare[i], err = newAskAPI(ch.ep.Bare, l.hc, tok); err != nil {
				return err
			}
			need := l.warm + l.perWorker*o.Rounds
			l.convs[i] = make([]string, 0, need)
			for range need {
				id, err := l.ours[i].conversation(ctx)
				if err != nil {
					return err
				}
				l.convs[i] = append(l.convs[i], id)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("time to ticket, setup at concurrency %d: %w", c, err)
		}
	}
	ch.startCPU(ctx)

	var out []TicketLevel
	for _, l := range levels {
		c := l.c
		// burst puts n asks per worker; ours go to fresh conversations, the bare handler's to any.
		burst := func(isOurs bool, n int, lat []time.Duration) (time.Duration, error) {
			apis := l.bare
			if isOurs {
				apis = l.ours
			}
			start := time.Now()
			err := parallel(ctx, c, func(ctx context.Context, i int) error {
				for k := range n {
					cid := l.convs[i][0]
					if isOurs {
						cid = l.convs[i][l.next[i]]
						l.next[i]++
					}
					t0 := time.Now()
					if _, err := apis[i].ask(ctx, cid, questionNow); err != nil {
						return err
					}
					if lat != nil {
						lat[i*n+k] = time.Since(t0)
					}
				}
				return nil
			})
			return time.Since(start), err
		}
		// Warm both: connections and caches.
		if _, err := burst(false, l.warm, nil); err != nil {
			return nil, fmt.Errorf("time to ticket, bare warm-up: %w", err)
		}
		if _, err := burst(true, l.warm, nil); err != nil {
			return nil, fmt.Errorf("time to ticket, warm-up: %w", err)
		}
		// measured is one burst with the server's CPU around it. The child is let settle
		// first and after (the runs after our 202s end within microseconds; 20 ms is ample),
		// and each CPU reading follows a forced GC, so that a burst pays for its own garbage.
		settle := 20 * time.Millisecond
		measured := func(isOurs bool, lat []time.Duration) (d, cpu, store time.Duration, alloc uint64, err error) {
			time.Sleep(settle)
			c0, a0, err := ch.serverCPU(ctx)
			if err != nil {
				return 0, 0, 0, 0, err
			}
			s0, err := storeCPU(ctx)
			if err != nil {
				return 0, 0, 0, 0, err
			}
			if d, err = burst(isOurs, l.perWorker, lat); err != nil {
				return 0, 0, 0, 0, err
			}
			time.Sleep(settle)
			c1, a1, err := ch.serverCPU(ctx)
			if err != nil {
				return 0, 0, 0, 0, err
			}
			s1, err := storeCPU(ctx)
			return d, c1 - c0, s1 - s0, a1 - a0, err
		}
		var oursLat, bareLat []time.Duration
		var oursTime, bareTime time.Duration
		var p50Ratios, cpuRatios, oursCPU, bareCPU, storeCPUs, oursAlloc, bareAlloc []float64
		asks := float64(c * l.perWorker)
		for r := range o.Rounds {
			// Alternate which goes first, so that drift in the machine's load cancels out.
			var p50 [2]float64
			var cpu [2]float64
			for _, isOurs := range []bool{r%2 == 1, r%2 == 0} {
				lat := make([]time.Duration, c*l.perWorker)
				d, cpuUsed, storeUsed, alloc, err := measured(isOurs, lat)
				if err != nil {
					return nil, fmt.Errorf("time to ticket at concurrency %d: %w", c, err)
				}
				i := 1
				if isOurs {
					i = 0
					oursLat, oursTime = append(oursLat, lat...), oursTime+d
					storeCPUs = append(storeCPUs, float64(storeUsed.Nanoseconds())/1e3/asks)
					oursAlloc = append(oursAlloc, float64(alloc)/asks)
				} else {
					bareLat, bareTime = append(bareLat, lat...), bareTime+d
					bareAlloc = append(bareAlloc, float64(alloc)/asks)
				}
				cpu[i] = float64(cpuUsed.Nanoseconds()) / 1e3 / asks
				p50[i] = summarise(lat).P50
			}
			p50Ratios = append(p50Ratios, ratio(p50[0], p50[1]))
			cpuRatios = append(cpuRatios, ratio(cpu[0], cpu[1]))
			oursCPU, bareCPU = append(oursCPU, cpu[0]), append(bareCPU, cpu[1])
		}
		lv := TicketLevel{
			Concurrency: c,
			OursRPS:     float64(len(oursLat)) / oursTime.Seconds(),
			BareRPS:     float64(len(bareLat)) / bareTime.Seconds(),
			Ours:        summarise(oursLat),
			Bare:        summarise(bareLat),
			OursCPUUS:   median(oursCPU),
			BareCPUUS:   median(bareCPU),
			CPURatio:    spreadOf(cpuRatios),
			StoreCPUUS:  median(storeCPUs),
			OursAllocB:  median(oursAlloc),
			BareAllocB:  median(bareAlloc),
		}
		lv.RatioP50Spread = spreadOf(p50Ratios)
		lv.RatioP50 = lv.RatioP50Spread.Median
		lv.RatioP99 = ratio(lv.Ours.P99, lv.Bare.P99)
		out = append(out, lv)
	}
	return out, nil
}
