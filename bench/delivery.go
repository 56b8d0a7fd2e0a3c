package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// DeliveryLevel is stream delivery to some readers of one ticket: a run emitting events as
// fast as it can, against the bare net/http batching writer of the same events.
type DeliveryLevel struct {
	Readers int `json:"readers"`
	// Events is the step events emitted per round; every reader receives all of them.
	Events int `json:"events"`
	// Ours, Bare and BareBatched are events per second delivered, summed over readers, the
	// median of the rounds. Bare is the batching writer (the baseline: each event encoded from
	// its struct by a producer, the writer writing whatever is pending with one flush, as a real
	// SSE server does); BareBatched is everything pre-encoded in one write and one flush (the
	// wire's ceiling; context, not a target). The JSON name of BareBatched is kept from when
	// Bare flushed every frame.
	Ours        float64 `json:"ours_events_per_s"`
	Bare        float64 `json:"bare_events_per_s"`
	BareBatched float64 `json:"bare_batched_events_per_s"`
	// Ratio is Ours / Bare (higher is better): the median of the per-round ratios, each
	// round's two measured back to back, which goes first alternating by round.
	Ratio float64 `json:"ratio"`
	// RatioSpread is Ratio with the smallest and largest per-round ratio.
	RatioSpread Spread `json:"ratio_spread"`
	// BytesPerEvent is the mean size of one of our frames on the wire.
	BytesPerEvent float64 `json:"bytes_per_event"`
}

type deliveryOptions struct {
	Readers []int
	Events  func(readers int) int
	Rounds  int
}

// delivery measures events/s from a gated run to its readers: every reader attaches and has
// its stream open, then the run is released and emits; the clock runs from the release to
// the last reader's done.
func delivery(ctx context.Context, ch *child, o deliveryOptions) ([]DeliveryLevel, error) {
	tok, err := ch.token(ctx, "bench-stream")
	if err != nil {
		return nil, err
	}
	ch.startCPU(ctx)
	var out []DeliveryLevel
	for _, r := range o.Readers {
		n := o.Events(r)
		hc := newHTTPClient(r + 4)
		api, err := newAskAPI(ch.ep.Ask, hc, tok)
		if err != nil {
			return nil, err
		}
		var ours, bare, batched, ratios []float64
		var bytesPerEvent float64
		for round := range o.Rounds + 1 { // round 0 warms up and is not counted
			var oursRate, bareRate, bpe float64
			// Ours and the baseline back to back, which goes first alternating by round so that
			// drift in the machine's load does not favour either; the ceiling last.
			for _, isOurs := range []bool{round%2 == 0, round%2 == 1} {
				if isOurs {
					oursRate, bpe, err = deliverOurs(ctx, ch, api, r, n)
					if err != nil {
						return nil, fmt.Errorf("delivery to %d readers: %w", r, err)
					}
				} else if bareRate, err = deliverBare(ctx, ch, hc, tok, r, n, "batch", round); err != nil {
					return nil, fmt.Errorf("bare delivery to %d readers: %w", r, err)
				}
			}
			batchRate, err := deliverBare(ctx, ch, hc, tok, r, n, "end", round)
			if err != nil {
				return nil, fmt.Errorf("bare one-write delivery to %d readers: %w", r, err)
			}
			if round > 0 {
				ours, bare, batched = append(ours, oursRate), append(bare, bareRate), append(batched, batchRate)
				ratios = append(ratios, ratio(oursRate, bareRate))
				bytesPerEvent = bpe
			}
		}
		hc.CloseIdleConnections()
		sp := spreadOf(ratios)
		lv := DeliveryLevel{Readers: r, Events: n, Ours: median(ours), Bare: median(bare), BareBatched: median(batched),
			Ratio: sp.Median, RatioSpread: sp, BytesPerEvent: bytesPerEvent}
		out = append(out, lv)
	}
	return out, nil
}

// fanIn opens r streams with open, waits until each has its opening comment, calls release,
// and returns the time from release to the last stream's end, and the counters.
func fanIn(ctx context.Context, r int, open func(ctx context.Context) (*http.Response, error), stop func(frame) bool, release func() error) (time.Duration, []*sseCounter, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	counters := make([]*sseCounter, r)
	ready := make(chan error, r)
	var start time.Time
	end := make([]time.Time, r)
	var wg sync.WaitGroup
	errs := make(chan error, r)
	for i := range r {
		wg.Go(func() {
			resp, err := open(ctx)
			if err != nil {
				ready <- err
				return
			}
			defer resp.Body.Close()
			s := newSSECounter(resp.Body)
			counters[i] = s
			if err := s.untilComment(); err != nil {
				ready <- err
				return
			}
			ready <- nil
			if err := s.until(stop); err != nil {
				errs <- err
				return
			}
			end[i] = time.Now()
		})
	}
	var first error
	for range r {
		if err := <-ready; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	if first == nil {
		start = time.Now()
		if err := release(); err != nil {
			first = err
			cancel()
		}
	}
	wg.Wait()
	close(errs)
	if first != nil {
		return 0, nil, first
	}
	if err, ok := <-errs; ok {
		return 0, nil, err
	}
	var last time.Time
	for _, t := range end {
		if t.After(last) {
			last = t
		}
	}
	return last.Sub(start), counters, nil
}

func deliverOurs(ctx context.Context, ch *child, api *askAPI, r, n int) (rate, bytesPerEvent float64, err error) {
	cid, err := api.conversation(ctx)
	if err != nil {
		return 0, 0, err
	}
	ticket, err := api.ask(ctx, cid, questionEmit(n, true))
	if err != nil {
		return 0, 0, err
	}
	d, counters, err := fanIn(ctx, r,
		func(ctx context.Context) (*http.Response, error) { return api.stream(ctx, ticket, -1) },
		isDone,
		func() error { return ch.release(ctx, ticket) })
	if err != nil {
		return 0, 0, err
	}
	for _, c := range counters {
		if c.Frames < n {
			return 0, 0, fmt.Errorf("a reader received %d events, want at least %d", c.Frames, n)
		}
	}
	return float64(r*n) / d.Seconds(), float64(counters[0].Bytes) / float64(counters[0].Frames), nil
}

func deliverBare(ctx context.Context, ch *child, hc *http.Client, token string, r, n int, flush string, round int) (float64, error) {
	key := "bare-" + strconv.Itoa(r) + "-" + flush + "-" + strconv.Itoa(round)
	u := ch.ep.BareSSE + "/?n=" + strconv.Itoa(n) + "&flush=" + flush + "&gate=" + key
	d, counters, err := fanIn(ctx, r,
		func(ctx context.Context) (*http.Response, error) { return openBare(ctx, hc, u, token) },
		isDone,
		func() error { return ch.release(ctx, key) })
	if err != nil {
		return 0, err
	}
	for _, c := range counters {
		if c.Frames < n {
			return 0, fmt.Errorf("a bare reader received %d events, want %d", c.Frames, n)
		}
	}
	return float64(r*n) / d.Seconds(), nil
}
