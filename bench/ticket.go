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
	Concurrency int     `json:"concurrency"`
	Ours        Latency `json:"ours"`
	Bare        Latency `json:"bare"`
	OursRPS     float64 `json:"ours_rps"`
	BareRPS     float64 `json:"bare_rps"`
	// RatioP50 and RatioP99 are ours / bare (lower is better; 1 is the machine's limit).
	RatioP50 float64 `json:"ratio_p50"`
	RatioP99 float64 `json:"ratio_p99"`
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
func timeToTicket(ctx context.Context, ch *child, o ticketOptions) ([]TicketLevel, error) {
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
		var oursLat, bareLat []time.Duration
		var oursTime, bareTime time.Duration
		for r := range o.Rounds {
			// Alternate which goes first, so that drift in the machine's load cancels out.
			for _, isOurs := range []bool{r%2 == 1, r%2 == 0} {
				lat := make([]time.Duration, c*l.perWorker)
				d, err := burst(isOurs, l.perWorker, lat)
				if err != nil {
					return nil, fmt.Errorf("time to ticket at concurrency %d: %w", c, err)
				}
				if isOurs {
					oursLat, oursTime = append(oursLat, lat...), oursTime+d
				} else {
					bareLat, bareTime = append(bareLat, lat...), bareTime+d
				}
			}
		}
		lv := TicketLevel{
			Concurrency: c,
			OursRPS:     float64(len(oursLat)) / oursTime.Seconds(),
			BareRPS:     float64(len(bareLat)) / bareTime.Seconds(),
			Ours:        summarise(oursLat),
			Bare:        summarise(bareLat),
		}
		lv.RatioP50 = ratio(lv.Ours.P50, lv.Bare.P50)
		lv.RatioP99 = ratio(lv.Ours.P99, lv.Bare.P99)
		out = append(out, lv)
	}
	return out, nil
}
