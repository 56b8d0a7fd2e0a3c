package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Phase2Question is the ask of the phase-2 workload: the README's wrong-winner question, where
// phase 2's divergence is not null, so the figure includes the catalog-withheld branch.
const Phase2Question = "Which team had the highest change failure rate in 2026-Q3?"

// Phase2Cost is what phase 2 costs per ask against phase 1, both on the split demo (a catalog
// and a warehouse source, the llm-stub at zero delay), asked one at a time in alternating
// rounds in the same run, so the ratio holds on a noisy machine.
type Phase2Cost struct {
	Question string    `json:"question"`
	Date     string    `json:"date"`
	Phase1   AskCost   `json:"phase1"`
	Phase2   AskCost   `json:"phase2"`
	Ratio    CostRatio `json:"ratio"`
	// Divergences counts the phase-2 answers that carried a divergence (all should).
	Divergences int `json:"divergences"`
}

// AskCost is one phase's asks: ticket → done latency, and per ask the means of what done
// reports.
type AskCost struct {
	Latency      Latency        `json:"latency"`
	ModelCalls   float64        `json:"model_calls"`
	Steps        float64        `json:"steps"`
	InputTokens  float64        `json:"input_tokens"`
	OutputTokens float64        `json:"output_tokens"`
	Outcomes     map[string]int `json:"outcomes"`
}

// CostRatio is phase 2 over phase 1.
type CostRatio struct {
	LatencyP50  float64 `json:"latency_p50"`
	ModelCalls  float64 `json:"model_calls"`
	Steps       float64 `json:"steps"`
	InputTokens float64 `json:"input_tokens"`
}

// askCosted times ticket → done of one ask in a fresh conversation (opened untimed) and returns
// its done event and whether its answer carried a divergence.
func askCosted(ctx context.Context, api *askAPI, question string) (time.Duration, doneBody, bool, error) {
	var done doneBody
	cid, err := api.conversation(ctx)
	if err != nil {
		return 0, done, false, err
	}
	t0 := time.Now()
	ticket, err := api.ask(ctx, cid, question)
	if err != nil {
		return 0, done, false, err
	}
	resp, err := api.stream(ctx, ticket, -1)
	if err != nil {
		return 0, done, false, err
	}
	defer resp.Body.Close()
	s := newSSECounter(resp.Body)
	diverged := false
	err = s.until(func(f frame) bool {
		switch string(f.Event) {
		case "answer":
			var a struct {
				Divergence json.RawMessage `json:"divergence"`
			}
			diverged = json.Unmarshal(f.Data, &a) == nil && len(a.Divergence) > 0 && string(a.Divergence) != "null"
		case "done":
			_ = json.Unmarshal(f.Data, &done)
		}
		return isDone(f)
	})
	return time.Since(t0), done, diverged, err
}

type doneBody struct {
	Outcome      string `json:"outcome"`
	Steps        int64  `json:"steps"`
	ModelCalls   int64  `json:"model_calls"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
}

// phase2 asks Phase2Question of the phase-1 child and the phase-2 child in alternating rounds
// (after a warm-up of each) and reports each phase's cost and the ratio.
func phase2(ctx context.Context, p1, p2 *child, rounds int) (Phase2Cost, error) {
	out := Phase2Cost{Question: Phase2Question, Date: time.Now().UTC().Format(time.RFC3339)}
	hc := newHTTPClient(4)
	defer hc.CloseIdleConnections()
	apis := make([]*askAPI, 2)
	for i, ch := range []*child{p1, p2} {
		tok, err := ch.token(ctx, "alice")
		if err != nil {
			return out, err
		}
		if apis[i], err = newAskAPI(ch.ep.Ask, hc, tok); err != nil {
			return out, err
		}
	}
	type acc struct {
		lat                      []time.Duration
		calls, steps, inTok, out int64
		outcomes                 map[string]int
	}
	accs := [2]*acc{{outcomes: map[string]int{}}, {outcomes: map[string]int{}}}
	for i := range rounds + 2 {
		for k, api := range apis {
			d, done, diverged, err := askCosted(ctx, api, Phase2Question)
			if err != nil {
				return out, fmt.Errorf("phase %d ask: %w", k+1, err)
			}
			if i < 2 {
				continue // warm-up
			}
			a := accs[k]
			a.lat = append(a.lat, d)
			a.calls += done.ModelCalls
			a.steps += done.Steps
			a.inTok += done.InputTokens
			a.out += done.OutputTokens
			a.outcomes[done.Outcome]++
			if k == 1 && diverged {
				out.Divergences++
			}
		}
	}
	cost := func(a *acc) AskCost {
		n := float64(max(len(a.lat), 1))
		return AskCost{Latency: summarise(a.lat), ModelCalls: float64(a.calls) / n, Steps: float64(a.steps) / n,
			InputTokens: float64(a.inTok) / n, OutputTokens: float64(a.out) / n, Outcomes: a.outcomes}
	}
	out.Phase1, out.Phase2 = cost(accs[0]), cost(accs[1])
	ratio := func(a, b float64) float64 {
		if a == 0 {
			return 0
		}
		return b / a
	}
	out.Ratio = CostRatio{
		LatencyP50:  ratio(out.Phase1.Latency.P50, out.Phase2.Latency.P50),
		ModelCalls:  ratio(out.Phase1.ModelCalls, out.Phase2.ModelCalls),
		Steps:       ratio(out.Phase1.Steps, out.Phase2.Steps),
		InputTokens: ratio(out.Phase1.InputTokens, out.Phase2.InputTokens),
	}
	return out, nil
}

// phase2Section writes the report's phase-2 section.
func (r *Report) phase2Section(p func(string, ...any)) {
	c := r.Phase2
	if c == nil {
		p("No figure (the ask-phase2 workload did not run).\n\n")
		return
	}
	p("%q asked one at a time, alternating a phase-1 and a phase-2 development stack, both on the split demo (a catalog source and a warehouse source over MCP, the llm-stub at zero delay), measured %s. ", c.Question, c.Date)
	p("Phase 2 runs a branch per source and the catalog-withheld branch for `divergence` (%d of %d phase-2 answers carried one), then the supervisor's reconciliation. ", c.Divergences, c.Phase2.Latency.N)
	p("Per ask, means from `done`; latency ticket → `done`.\n\n")
	p("| | p50 | p99 | model calls | tool calls | input tokens | output tokens | n |\n|---|---|---|---|---|---|---|---|\n")
	for _, row := range []struct {
		name string
		c    AskCost
	}{{"phase 1", c.Phase1}, {"phase 2", c.Phase2}} {
		p("| %s | %.1f ms | %.1f ms | %.1f | %.1f | %.0f | %.0f | %d |\n", row.name, row.c.Latency.P50, row.c.Latency.P99,
			row.c.ModelCalls, row.c.Steps, row.c.InputTokens, row.c.OutputTokens, row.c.Latency.N)
	}
	p("| **phase 2 / phase 1** | **%.2f×** | | **%.2f×** | %.2f× | %.2f× | | |\n\n", c.Ratio.LatencyP50, c.Ratio.ModelCalls, c.Ratio.Steps, c.Ratio.InputTokens)
	p("With a real model each model call is a turn of seconds, so the model-call ratio, not the stub's latency, is what phase 2 costs; branches run concurrently, so the wall time grows by the longest branch plus the reconciliation, not by their sum.\n\n")
}
