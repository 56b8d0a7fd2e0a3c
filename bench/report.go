package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Report is everything one run measured. report.json is this, encoded.
type Report struct {
	Machine   Machine `json:"machine"`
	Quick     bool    `json:"quick"`
	DurationS float64 `json:"duration_s"`

	TimeToTicket []TicketLevel   `json:"time_to_ticket"`
	E2E          *E2E            `json:"ask_end_to_end,omitempty"`
	Phase2       *Phase2Cost     `json:"phase2,omitempty"`
	Delivery     []DeliveryLevel `json:"stream_delivery"`
	Idle         *Idle           `json:"idle_streams,omitempty"`
	Replay       *Replay         `json:"replay,omitempty"`
	Peer         *Peer           `json:"peer_mcp,omitempty"`
	// Redis is time to ticket, stream delivery and replay once more with the Redis store; nil
	// when the run did not ask for them (askbench -redis=false).
	Redis *RedisRun `json:"redis,omitempty"`
	// RedisCluster is the same on a Redis Cluster of three primaries; nil when the run did
	// not ask for them (askbench -redis-cluster=false).
	RedisCluster *RedisRun `json:"redis_cluster,omitempty"`
	Micro        []Micro   `json:"microbenchmarks"`
	Profiles     []Profile `json:"profiles"`
	Targets      []Target  `json:"targets"`
	// Errors are workloads that failed; their figures are missing.
	Errors []string `json:"errors,omitempty"`
}

// Target is one of the targets and where this run stands.
type Target struct {
	Name string `json:"name"`
	Goal string `json:"goal"`
	// Measured states the figure, its baseline and the ratio the goal is about.
	Measured string `json:"measured"`
	// Met is nil when the run has no figure for it.
	Met *bool `json:"met"`
}

// kb is the unit of the memory target.
const kb = 1024

func met(b bool) *bool { return &b }

// targets assesses the targets against r.
func targets(r *Report) []Target {
	var ts []Target
	t := Target{Name: "time to ticket", Goal: "at concurrency 64: p50 ≤ 1.3× the bare handler's (median of per-round ratios) and server CPU per ask ≤ 1.5×"}
	for _, l := range r.TimeToTicket {
		if l.Concurrency == 64 {
			t.Measured = fmt.Sprintf("p50 %.3f ms vs bare %.3f ms: %s; CPU %.1f µs vs %.1f µs per ask: %s",
				l.Ours.P50, l.Bare.P50, l.RatioP50Spread, l.OursCPUUS, l.BareCPUUS, l.CPURatio)
			t.Met = met(l.RatioP50 > 0 && l.RatioP50 <= 1.3 && l.CPURatio.Median > 0 && l.CPURatio.Median <= 1.5)
		}
	}
	ts = append(ts, t)

	t = Target{Name: "stream delivery", Goal: "to 1 reader ≥ 0.8× the batching bare writer's events/s (median of per-round ratios; 100 readers shown, not judged)"}
	if len(r.Delivery) > 0 {
		var parts []string
		for _, l := range r.Delivery {
			parts = append(parts, fmt.Sprintf("%d reader(s): %.0f vs %.0f events/s, %s", l.Readers, l.Ours, l.Bare, l.RatioSpread))
			if l.Readers == 1 {
				t.Met = met(l.Ratio >= 0.8)
			}
		}
		t.Measured = strings.Join(parts, "; ")
	}
	ts = append(ts, t)

	t = Target{Name: "idle streams", Goal: "≤ 40 KB resident memory per idle stream at 10k streams"}
	if r.Idle != nil {
		for _, l := range r.Idle.Levels {
			if l.Streams == 10000 {
				t.Measured = fmt.Sprintf("%.1f KB per stream (run %.1f KB + connection %.1f KB over the last 5k)", l.PerStreamBytes/kb, l.PerRunBytes/kb, l.PerConnBytes/kb)
				t.Met = met(l.PerStreamBytes <= 40*kb)
			}
		}
		if t.Met == nil && r.Idle.Ceiling != "" {
			t.Measured = r.Idle.Ceiling
		}
	}
	ts = append(ts, t)

	t = Target{Name: "replay", Goal: "full replay of 1000 events ≤ 5 ms"}
	if r.Replay != nil {
		t.Measured = fmt.Sprintf("p50 %.2f ms, p99 %.2f ms (bare one-write %.2f ms: %.2f×)", r.Replay.Ours.P50, r.Replay.Ours.P99, r.Replay.Bare.P50, r.Replay.RatioP50)
		t.Met = met(r.Replay.Events == 1000 && r.Replay.Ours.P50 <= 5)
	}
	ts = append(ts, t)

	t = Target{Name: "peer", Goal: "ahead of the MCP Go SDK on the same stream-and-resume workload"}
	if r.Peer != nil {
		p := r.Peer
		t.Measured = fmt.Sprintf("live p50 %.2f ms vs %.2f ms (%.2f× faster); replay p50 %.2f ms vs %.2f ms (%.2f× faster)",
			p.OursLive.P50, p.PeerLive.P50, p.LiveSpeedup, p.OursReplay.P50, p.PeerReplay.P50, p.ReplaySpeedup)
		t.Met = met(p.LiveSpeedup > 1 && p.ReplaySpeedup > 1)
	}
	ts = append(ts, t)
	ts = append(ts, redisTargets(r, "redis", r.Redis)...)
	return append(ts, redisTargets(r, "redis-cluster", r.RedisCluster)...)
}

// redisTargets are the Redis targets for one Redis store (store names it: redis, or
// redis-cluster), each against the in-memory figure of the same run; none when the run has no
// rows for that store.
func redisTargets(r *Report, store string, rr *RedisRun) []Target {
	if rr == nil || rr.Skipped != "" {
		return nil
	}
	var ts []Target
	t := Target{Name: store + ": time to ticket", Goal: "p50 at concurrency 64 ≤ 2× the in-memory figure (median of per-round ratios, in-memory measured in the same rounds)"}
	for _, m := range r.TimeToTicket {
		for _, l := range rr.TimeToTicket {
			if m.Concurrency == 64 && l.Concurrency == 64 {
				x := ratio(l.Ours.P50, m.Ours.P50)
				t.Measured = fmt.Sprintf("%.3f ms vs %.3f ms: %.2f×", l.Ours.P50, m.Ours.P50, x)
				if v := l.VsMemory; v != nil {
					// Judged on the in-memory figure measured in the same rounds.
					x = v.RatioP50.Median
					t.Measured = fmt.Sprintf("%.3f ms vs %.3f ms in memory, in the same rounds: %s (against section 1's in-memory row, another workload: %s)",
						l.Ours.P50, v.Memory.P50, v.RatioP50, t.Measured)
				}
				t.Met = met(x > 0 && x <= 2)
			}
		}
	}
	ts = append(ts, t)
	for _, want := range []struct {
		readers int
		min     float64
	}{{1, 0.2}, {100, 0.5}} {
		t = Target{Name: fmt.Sprintf("%s: delivery to %d reader(s)", store, want.readers), Goal: fmt.Sprintf("≥ %.1f× the in-memory events/s", want.min)}
		for _, m := range r.Delivery {
			for _, l := range rr.Delivery {
				if m.Readers == want.readers && l.Readers == want.readers {
					x := ratio(l.Ours, m.Ours)
					t.Measured = fmt.Sprintf("%.0f vs %.0f events/s: %.3f×", l.Ours, m.Ours, x)
					t.Met = met(x >= want.min)
				}
			}
		}
		ts = append(ts, t)
	}
	t = Target{Name: store + ": replay", Goal: "full replay of 1000 events p50 ≤ 2× the in-memory figure"}
	if rr.Replay != nil && r.Replay != nil {
		x := ratio(rr.Replay.Ours.P50, r.Replay.Ours.P50)
		t.Measured = fmt.Sprintf("%.2f ms vs %.2f ms: %.2f×", rr.Replay.Ours.P50, r.Replay.Ours.P50, x)
		t.Met = met(x > 0 && x <= 2)
	}
	return append(ts, t)
}

// write writes report.json and REPORT.md into dir; findings, when not empty, is the
// hand-written analysis the Markdown embeds.
func (r *Report) write(dir, findings string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var j bytes.Buffer
	enc := json.NewEncoder(&j)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // profile lines hold "<=": keep them readable
	if err := enc.Encode(r); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), j.Bytes(), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "REPORT.md"), []byte(r.markdown(findings)), 0o644)
}
