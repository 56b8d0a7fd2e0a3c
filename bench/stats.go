package bench

import (
	"fmt"
	"slices"
	"time"
)

// Latency summarises a set of durations, in milliseconds.
type Latency struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P99  float64 `json:"p99_ms"`
	Mean float64 `json:"mean_ms"`
	Max  float64 `json:"max_ms"`
}

// summarise returns the nearest-rank percentiles of ds. It sorts ds.
func summarise(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return Latency{
		N:    len(ds),
		P50:  ms(percentile(ds, 50)),
		P99:  ms(percentile(ds, 99)),
		Mean: ms(sum / time.Duration(len(ds))),
		Max:  ms(ds[len(ds)-1]),
	}
}

// percentile is the nearest-rank p-th percentile of sorted ds.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// median of xs (which it sorts); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Spread is a ratio judged across rounds: the median of the per-round ratios, and their
// smallest and largest, so that a reader sees how far one run's rounds disagree.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Rounds int     `json:"rounds"`
}

// spreadOf summarises per-round ratios (it sorts xs).
func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	m := median(xs) // sorts
	return Spread{Median: m, Min: xs[0], Max: xs[len(xs)-1], Rounds: len(xs)}
}

// String is "1.23× (1.10–1.40×, 7 rounds)".
func (s Spread) String() string {
	return fmt.Sprintf("%.2f× (%.2f–%.2f×, %d rounds)", s.Median, s.Min, s.Max, s.Rounds)
}
