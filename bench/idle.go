package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// IdleLevel is the cost of some open, silent streams: each its own ask, whose run waits
// without emitting, watched by one SSE connection that only receives keep-alives.
type IdleLevel struct {
	Streams int `json:"streams"`
	// RSSBytes is the child's resident set with the streams open (after a GC that returned
	// free memory to the OS).
	RSSBytes int64 `json:"rss_bytes"`
	// PerStreamBytes is (RSSBytes - the baseline) / Streams: a silent run and its stream.
	PerStreamBytes float64 `json:"per_stream_bytes"`
	// PerRunBytes and PerConnBytes split the streams added at this level: the growth when their
	// runs were created, and then when their connections opened, per stream added.
	PerRunBytes  float64 `json:"per_run_bytes"`
	PerConnBytes float64 `json:"per_conn_bytes"`
	// PerRunStackBytes and PerConnStackBytes split the goroutine stacks the same way.
	PerRunStackBytes  float64 `json:"per_run_stack_bytes"`
	PerConnStackBytes float64 `json:"per_conn_stack_bytes"`
	// HeapInuse and StackInuse are the Go runtime's view at the same moment.
	HeapInuseBytes  uint64 `json:"heap_inuse_bytes"`
	StackInuseBytes uint64 `json:"stack_inuse_bytes"`
	Goroutines      int    `json:"goroutines"`
	// GoroutinesPerStream is (Goroutines - the baseline) / Streams.
	GoroutinesPerStream float64 `json:"goroutines_per_stream"`
	// CPUPercent is the child's CPU time over the idle window, as a share of one core.
	CPUPercent float64 `json:"cpu_percent_of_one_core"`
	// KeepAlives is the keep-alive comments the readers received during the window.
	KeepAlives int64 `json:"keepalives_in_window"`
}

// Idle is the idle-streams workload.
type Idle struct {
	KeepAliveS float64 `json:"keepalive_s"`
	WindowS    float64 `json:"window_s"`
	// BaselineRSSBytes and BaselineGoroutines are the child's before any stream.
	BaselineRSSBytes   int64       `json:"baseline_rss_bytes"`
	BaselineGoroutines int         `json:"baseline_goroutines"`
	Levels             []IdleLevel `json:"levels"`
	// NoFileLimit is RLIMIT_NOFILE as raised for the run; Ceiling says which level it
	// stopped, if one.
	NoFileLimit uint64 `json:"nofile_limit"`
	Ceiling     string `json:"ceiling,omitempty"`
}

type idleOptions struct {
	Levels    []int
	Window    time.Duration
	KeepAlive time.Duration
	// HeapProfile, when set, is where the child writes a heap profile at the last level.
	HeapProfile string
	// CPUProfile, when set, is where the child writes a CPU profile of the last window.
	CPUProfile string
}

const idleWorkers = 32

func idle(ctx context.Context, ch *child, o idleOptions, nofile uint64) (Idle, error) {
	out := Idle{KeepAliveS: o.KeepAlive.Seconds(), WindowS: o.Window.Seconds(), NoFileLimit: nofile}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hc := newHTTPClient(idleWorkers * 2)
	defer hc.CloseIdleConnections()
	apis := make([]*askAPI, idleWorkers)
	for i := range apis {
		tok, err := ch.token(ctx, fmt.Sprintf("bench-idle-%d", i))
		if err != nil {
			return out, err
		}
		if apis[i], err = newAskAPI(ch.ep.Ask, hc, tok); err != nil {
			return out, err
		}
	}
	measure := func() (int64, debugStats, error) {
		if err := ch.debug(ctx, "/gc"); err != nil {
			return 0, debugStats{}, err
		}
		rss, err := ch.rssBytes()
		if err != nil {
			return 0, debugStats{}, err
		}
		st, err := ch.stats(ctx)
		return rss, st, err
	}
	rss0, st0, err := measure()
	if err != nil {
		return out, err
	}
	out.BaselineRSSBytes, out.BaselineGoroutines = rss0, st0.Goroutines

	var keepalives atomic.Int64
	var readers sync.WaitGroup
	defer readers.Wait()
	defer cancel()
	open, prevRSS, prevStack := 0, rss0, st0.StackInuse
	for li, level := range o.Levels {
		// Every stream costs a descriptor here and one in the child; keep a margin for the rest.
		if nofile > 0 && uint64(level)+256 > nofile {
			out.Ceiling = fmt.Sprintf("RLIMIT_NOFILE %d stops the run before %d streams", nofile, level)
			break
		}
		add := level - open
		tickets := make([][]string, idleWorkers)
		err := parallel(ctx, idleWorkers, func(ctx context.Context, w int) error {
			for k := w; k < add; k += idleWorkers {
				cid, err := apis[w].conversation(ctx)
				if err != nil {
					return err
				}
				t, err := apis[w].ask(ctx, cid, questionSilent)
				if err != nil {
					return err
				}
				tickets[w] = append(tickets[w], t)
			}
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("idle streams, creating runs for %d: %w", level, err)
		}
		rssRuns, stRuns, err := measure()
		if err != nil {
			return out, err
		}
		// Open one stream per new run; each reader holds it until the workload ends.
		var opened sync.WaitGroup
		var openErr atomic.Pointer[error]
		for w := range idleWorkers {
			opened.Go(func() {
				for _, t := range tickets[w] {
					resp, err := apis[w].stream(ctx, t, -1)
					if err != nil {
						openErr.CompareAndSwap(nil, &err)
						return
					}
					s := newSSECounter(resp.Body)
					if err := s.untilComment(); err != nil {
						resp.Body.Close()
						openErr.CompareAndSwap(nil, &err)
						return
					}
					readers.Go(func() {
						defer resp.Body.Close()
						for {
							_, ok, err := s.next()
							if err != nil {
								if err != io.EOF && ctx.Err() == nil {
									openErr.CompareAndSwap(nil, &err)
								}
								return
							}
							if !ok {
								keepalives.Add(1)
							}
						}
					})
				}
			})
		}
		opened.Wait()
		if p := openErr.Load(); p != nil {
			return out, fmt.Errorf("idle streams, opening %d: %w", level, *p)
		}
		open = level

		rss, st, err := measure()
		if err != nil {
			return out, err
		}
		last := li == len(o.Levels)-1
		if last && o.CPUProfile != "" {
			if err := ch.debug(ctx, "/cpu/start?path="+o.CPUProfile); err != nil {
				return out, err
			}
		}
		keepalives.Store(0)
		cpu0, err := ch.cpuTime()
		if err != nil {
			return out, err
		}
		t0 := time.Now()
		select {
		case <-time.After(o.Window):
		case <-ctx.Done():
			return out, ctx.Err()
		}
		cpu1, err := ch.cpuTime()
		if err != nil {
			return out, err
		}
		wall := time.Since(t0)
		if last && o.CPUProfile != "" {
			if err := ch.debug(ctx, "/cpu/stop"); err != nil {
				return out, err
			}
		}
		if last && o.HeapProfile != "" {
			if err := ch.debug(ctx, "/heap?path="+o.HeapProfile); err != nil {
				return out, err
			}
		}
		out.Levels = append(out.Levels, IdleLevel{
			Streams:             level,
			RSSBytes:            rss,
			PerStreamBytes:      float64(rss-rss0) / float64(level),
			PerRunBytes:         float64(rssRuns-prevRSS) / float64(add),
			PerConnBytes:        float64(rss-rssRuns) / float64(add),
			PerRunStackBytes:    float64(int64(stRuns.StackInuse)-int64(prevStack)) / float64(add),
			PerConnStackBytes:   float64(int64(st.StackInuse)-int64(stRuns.StackInuse)) / float64(add),
			HeapInuseBytes:      st.HeapInuse,
			StackInuseBytes:     st.StackInuse,
			Goroutines:          st.Goroutines,
			GoroutinesPerStream: float64(st.Goroutines-st0.Goroutines) / float64(level),
			CPUPercent:          100 * (cpu1 - cpu0).Seconds() / wall.Seconds(),
			KeepAlives:          keepalives.Load(),
		})
		prevRSS, prevStack = rss, st.StackInuse
	}
	return out, nil
}
