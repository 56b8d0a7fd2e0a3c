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
	// OursDrainMS is how long after a burst's last 202 its runs had all ended, their ends
	// stored (the median over rounds, in ms): whether the ends keep up with the tickets, or
	// work is left over that the measured burst did not wait for (its CPU reading waits). It
	// includes the debug call's own round trip: the in-memory child's 0.2 ms is mostly that.
	OursDrainMS float64 `json:"ours_drain_ms"`
	// VsMemory, on the Redis rows, is ours on an in-memory child measured as a third side of
	// the same rounds.
	VsMemory *VsMemory `json:"vs_memory,omitempty"`
}

// VsMemory is the in-memory figure a Redis row is judged against, measured beside it: the
// same bursts to a child whose store is in memory, in the same rounds (the order rotating by
// round), so that the machine's drift between workloads stays out of the ratio.
type VsMemory struct {
	Memory      Latency `json:"memory"`
	MemoryRPS   float64 `json:"memory_rps"`
	MemoryCPUUS float64 `json:"memory_cpu_us_per_ask"`
	// MemoryDrainMS is OursDrainMS on the in-memory child.
	MemoryDrainMS float64 `json:"memory_drain_ms"`
	// RatioP50 is ours (on Redis) / ours in memory at p50: the median of the per-round ratios,
	// with the smallest and largest.
	RatioP50 Spread `json:"ratio_p50"`
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
// storeCPU, when not nil, reads the store's CPU time so far (redisCPU), for StoreCPUUS. mem,
// when not nil, is a child whose store is in memory: ours on it is a third side of every round
// (the Redis rows' in-memory figure, measured beside them: see VsMemory).
func timeToTicket(ctx context.Context, ch *child, o ticketOptions, storeCPU func(context.Context) (time.Duration, error), mem *child) ([]TicketLevel, error) {
	if storeCPU == nil { // the store is in the service's process: its CPU is the server's
		storeCPU = func(context.Context) (time.Duration, error) { return 0, nil }
	}
	// side is one target of a level's bursts: its child, its clients and (for ours, on either
	// child) each worker's fresh conversations.
	type side struct {
		ch    *child
		ours  bool
		apis  []*askAPI
		convs [][]string
		next  []int
	}
	// level is one concurrency's sides, all made before anything is timed: bare, ours, and mem
	// when there is one (the order of the first round; each later round rotates it by one).
	type level struct {
		c, perWorker, warm int
		hc                 *http.Client
		sides              []*side
	}
	const bare, ours, memOurs = 0, 1, 2
	var levels []*level
	defer func() {
		for _, l := range levels {
			l.hc.CloseIdleConnections()
		}
	}()
	for _, c := range o.Levels {
		l := &level{c: c, perWorker: max(o.Requests/c, 40), warm: max(10, 200/c), hc: newHTTPClient(c + 4)}
		l.sides = []*side{{ch: ch}, {ch: ch, ours: true}}
		if mem != nil {
			l.sides = append(l.sides, &side{ch: mem, ours: true})
		}
		for _, sd := range l.sides {
			sd.apis, sd.convs, sd.next = make([]*askAPI, c), make([][]string, c), make([]int, c)
		}
		levels = append(levels, l)
		need := l.warm + l.perWorker*o.Rounds
		err := parallel(ctx, c, func(ctx context.Context, i int) error {
			for k, sd := range l.sides {
				tok, err := sd.ch.token(ctx, fmt.Sprintf("bench-w%d", i))
				if err != nil {
					return err
				}
				url := sd.ch.ep.Ask
				if k == bare {
					url = sd.ch.ep.Bare
				}
				if sd.apis[i], err = newAskAPI(url, l.hc, tok); err != nil {
					return err
				}
				if !sd.ours {
					continue // its asks go to any conversation: ours's first (below)
				}
				sd.convs[i] = make([]string, 0, need)
				for range need {
					id, err := sd.apis[i].conversation(ctx)
					if err != nil {
						return err
					}
					sd.convs[i] = append(sd.convs[i], id)
				}
			}
			l.sides[bare].convs[i] = l.sides[ours].convs[i][:1]
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
		// burst puts n asks per worker; ours go to fresh conversations, the bare handler's to one.
		burst := func(sd *side, n int, lat []time.Duration) (time.Duration, error) {
			start := time.Now()
			err := parallel(ctx, c, func(ctx context.Context, i int) error {
				for k := range n {
					cid := sd.convs[i][0]
					if sd.ours {
						cid = sd.convs[i][sd.next[i]]
						sd.next[i]++
					}
					t0 := time.Now()
					if _, err := sd.apis[i].ask(ctx, cid, questionNow); err != nil {
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
		// quiet waits, after a burst of ours, until the child holds none of its asks: every run
		// ended and its end stored. A burst's runs end after its last 202, and an end the store
		// has not taken yet is work the next burst (another side's) would pay for.
		quiet := func(sd *side) (time.Duration, error) {
			if !sd.ours {
				return 0, nil
			}
			start := time.Now()
			err := sd.ch.debug(ctx, "/quiet")
			return time.Since(start), err
		}
		// Warm every side: connections and caches.
		for k, sd := range l.sides {
			if _, err := burst(sd, l.warm, nil); err != nil {
				return nil, fmt.Errorf("time to ticket, warm-up of side %d: %w", k, err)
			}
			if _, err := quiet(sd); err != nil {
				return nil, fmt.Errorf("time to ticket, warm-up of side %d: %w", k, err)
			}
		}
		// measured is one burst with its child's CPU around it: read once the child has settled
		// and, after the burst, once its runs have all ended (quiet) and it has settled again,
		// so that a burst pays for its runs' ends. Each CPU reading follows a forced GC, so that
		// a burst pays for its own garbage. The store's CPU is read around ours on ch only.
		settle := 20 * time.Millisecond
		measured := func(sd *side, lat []time.Duration) (d, drain, cpu, store time.Duration, alloc uint64, err error) {
			read := func() (time.Duration, uint64, time.Duration, error) {
				c, a, err := sd.ch.serverCPU(ctx)
				if err != nil || sd.ch != ch || !sd.ours {
					return c, a, 0, err
				}
				s, err := storeCPU(ctx)
				return c, a, s, err
			}
			time.Sleep(settle)
			c0, a0, s0, err := read()
			if err != nil {
				return 0, 0, 0, 0, 0, err
			}
			if d, err = burst(sd, l.perWorker, lat); err != nil {
				return 0, 0, 0, 0, 0, err
			}
			if drain, err = quiet(sd); err != nil {
				return 0, 0, 0, 0, 0, err
			}
			time.Sleep(settle)
			c1, a1, s1, err := read()
			return d, drain, c1 - c0, s1 - s0, a1 - a0, err
		}
		n := len(l.sides)
		lats := make([][]time.Duration, n)
		took := make([]time.Duration, n)
		var p50Ratios, memRatios, cpuRatios, oursCPU, bareCPU, memCPU, storeCPUs, oursAlloc, bareAlloc, oursDrain, memDrain []float64
		asks := float64(c * l.perWorker)
		for r := range o.Rounds {
			// Rotate which goes first, so that drift in the machine's load cancels out (two
			// sides: bare first in even rounds, ours in odd ones).
			var p50, cpu [3]float64
			for j := range n {
				k := (j + r) % n
				lat := make([]time.Duration, c*l.perWorker)
				d, drain, cpuUsed, storeUsed, alloc, err := measured(l.sides[k], lat)
				if err != nil {
					return nil, fmt.Errorf("time to ticket at concurrency %d: %w", c, err)
				}
				lats[k], took[k] = append(lats[k], lat...), took[k]+d
				cpu[k] = float64(cpuUsed.Nanoseconds()) / 1e3 / asks
				p50[k] = summarise(lat).P50
				switch k {
				case ours:
					storeCPUs = append(storeCPUs, float64(storeUsed.Nanoseconds())/1e3/asks)
					oursAlloc = append(oursAlloc, float64(alloc)/asks)
					oursDrain = append(oursDrain, float64(drain.Microseconds())/1e3)
				case memOurs:
					memDrain = append(memDrain, float64(drain.Microseconds())/1e3)
				case bare:
					bareAlloc = append(bareAlloc, float64(alloc)/asks)
				}
			}
			p50Ratios = append(p50Ratios, ratio(p50[ours], p50[bare]))
			cpuRatios = append(cpuRatios, ratio(cpu[ours], cpu[bare]))
			oursCPU, bareCPU = append(oursCPU, cpu[ours]), append(bareCPU, cpu[bare])
			if n > memOurs {
				memRatios = append(memRatios, ratio(p50[ours], p50[memOurs]))
				memCPU = append(memCPU, cpu[memOurs])
			}
		}
		lv := TicketLevel{
			Concurrency: c,
			OursRPS:     float64(len(lats[ours])) / took[ours].Seconds(),
			BareRPS:     float64(len(lats[bare])) / took[bare].Seconds(),
			Ours:        summarise(lats[ours]),
			Bare:        summarise(lats[bare]),
			OursCPUUS:   median(oursCPU),
			BareCPUUS:   median(bareCPU),
			CPURatio:    spreadOf(cpuRatios),
			StoreCPUUS:  median(storeCPUs),
			OursAllocB:  median(oursAlloc),
			BareAllocB:  median(bareAlloc),
			OursDrainMS: median(oursDrain),
		}
		if n > memOurs {
			m := summarise(lats[memOurs])
			sp := spreadOf(memRatios)
			lv.VsMemory = &VsMemory{Memory: m, MemoryRPS: float64(len(lats[memOurs])) / took[memOurs].Seconds(),
				MemoryCPUUS: median(memCPU), MemoryDrainMS: median(memDrain), RatioP50: sp}
		}
		lv.RatioP50Spread = spreadOf(p50Ratios)
		lv.RatioP50 = lv.RatioP50Spread.Median
		lv.RatioP99 = ratio(lv.Ours.P99, lv.Bare.P99)
		out = append(out, lv)
	}
	return out, nil
}
