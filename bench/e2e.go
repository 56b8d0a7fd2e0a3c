package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// E2EQuestion is the ask of the end-to-end workload: four tool calls on the demo source and
// five model turns of the llm-stub's default script, none of them delayed.
const E2EQuestion = "How many sev1 incidents did we have in 2026-Q2?"

// E2E is an ask end to end on the development stack: ticket → done.
type E2E struct {
	Question string `json:"question"`
	// Serial is one ask at a time: POST .../asks to done on the stream.
	Serial Latency `json:"serial"`
	// Concurrency asks at once for Duration: their latency, and completed asks per second.
	Concurrency int     `json:"concurrency"`
	DurationS   float64 `json:"duration_s"`
	Sustained   Latency `json:"sustained"`
	AsksPerS    float64 `json:"asks_per_s"`
	// Outcomes counts terminal event types over every ask (all should be answer).
	Outcomes map[string]int `json:"outcomes"`
}

type e2eOptions struct {
	Serial      int
	Concurrency int
	Duration    time.Duration
}

// oneAsk opens a conversation (untimed), then times ticket → done and returns the terminal
// event's type.
func oneAsk(ctx context.Context, api *askAPI) (time.Duration, string, error) {
	cid, err := api.conversation(ctx)
	if err != nil {
		return 0, "", err
	}
	t0 := time.Now()
	ticket, err := api.ask(ctx, cid, E2EQuestion)
	if err != nil {
		return 0, "", err
	}
	resp, err := api.stream(ctx, ticket, -1)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	s := newSSECounter(resp.Body)
	terminal := ""
	err = s.until(func(f frame) bool {
		switch string(f.Event) {
		case "answer", "abstention", "refusal", "error":
			terminal = string(f.Event)
		}
		return isDone(f)
	})
	return time.Since(t0), terminal, err
}

func e2e(ctx context.Context, ch *child, o e2eOptions) (E2E, error) {
	out := E2E{Question: E2EQuestion, Concurrency: o.Concurrency, Outcomes: map[string]int{}}
	hc := newHTTPClient(o.Concurrency + 4)
	defer hc.CloseIdleConnections()
	apis := make([]*askAPI, o.Concurrency)
	for i := range apis {
		tok, err := ch.token(ctx, "alice")
		if err != nil {
			return out, err
		}
		if apis[i], err = newAskAPI(ch.ep.Ask, hc, tok); err != nil {
			return out, err
		}
	}
	var mu sync.Mutex
	count := func(terminal string) {
		mu.Lock()
		out.Outcomes[terminal]++
		mu.Unlock()
	}
	var serial []time.Duration
	ch.startCPU(ctx)
	for i := range o.Serial + 3 {
		d, term, err := oneAsk(ctx, apis[0])
		if err != nil {
			return out, fmt.Errorf("ask end to end: %w", err)
		}
		count(term)
		if i >= 3 {
			serial = append(serial, d)
		}
	}
	out.Serial = summarise(serial)

	lat := make([][]time.Duration, o.Concurrency)
	start := time.Now()
	deadline := start.Add(o.Duration)
	err := parallel(ctx, o.Concurrency, func(ctx context.Context, i int) error {
		for time.Now().Before(deadline) {
			d, term, err := oneAsk(ctx, apis[i])
			if err != nil {
				return err
			}
			count(term)
			lat[i] = append(lat[i], d)
		}
		return nil
	})
	wall := time.Since(start)
	if err != nil {
		return out, fmt.Errorf("ask end to end at concurrency %d: %w", o.Concurrency, err)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	out.DurationS = wall.Seconds()
	out.AsksPerS = float64(len(all)) / wall.Seconds()
	out.Sustained = summarise(all)
	return out, nil
}
