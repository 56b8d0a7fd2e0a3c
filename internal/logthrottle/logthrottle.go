// Package logthrottle bounds the log lines of a failure that recurs while a dependency is
// away — at every tick of a background loop (a sweep, a poll, a lease's renewal) or at every
// request: its first occurrence is logged at once, then one line per interval at most,
// counting the ones not logged, and its end once, with how many occurrences it had. A loop
// that logged every failed tick wrote a line every few seconds, and a handler that logged every
// 503 a line per request, for as long as Redis was away, burying the few lines that said what
// happened — and neither said when it ended.
package logthrottle

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Gate is one recurring failure's state. The zero value is ready to use: Every 0 means
// DefaultEvery, CountKey "" means "failures", DurationKey "" means no duration. Set the
// fields before the first call. Safe for concurrent use; OK costs one atomic load while
// nothing is failing.
type Gate struct {
	// Every is the least time between two lines of the failure after its first.
	Every time.Duration
	// CountKey names the attribute of the end's line that counts the failure's occurrences.
	CountKey string
	// DurationKey, if set, names an attribute of the end's line: the milliseconds from the
	// failure's first occurrence to its end.
	DurationKey string

	// failing is whether a failure is under way; written only with mu held, read without it
	// by OK's fast path.
	failing atomic.Bool

	mu         sync.Mutex
	since      time.Time // the failure's first occurrence
	last       time.Time // its last line
	failures   int       // occurrences since the failure began
	suppressed int       // occurrences since its last line, not logged
}

// DefaultEvery is Gate.Every's default.
const DefaultEvery = time.Minute

// Fail records one occurrence of the failure, and logs msg with args at warn level, with the
// attribute suppressed (occurrences not logged since the line before), unless a line was
// logged within Every.
func (g *Gate) Fail(ctx context.Context, log *slog.Logger, msg string, args ...any) {
	every := g.Every
	if every <= 0 {
		every = DefaultEvery
	}
	now := time.Now()
	g.mu.Lock()
	if !g.failing.Load() {
		g.since, g.last, g.failures, g.suppressed = now, time.Time{}, 0, 0
		g.failing.Store(true)
	}
	g.failures++
	if !g.last.IsZero() && now.Sub(g.last) < every {
		g.suppressed++
		g.mu.Unlock()
		return
	}
	suppressed := g.suppressed
	g.last, g.suppressed = now, 0
	g.mu.Unlock()
	log.WarnContext(ctx, msg, append(args, "suppressed", suppressed)...)
}

// OK records a success; the first after a failure logs msg at info level with the count of the
// occurrences of the failure that it ends (CountKey) and, if DurationKey is set, the
// failure's duration.
func (g *Gate) OK(ctx context.Context, log *slog.Logger, msg string) {
	// A caller may be on a hot path: the server calls OK for every request the store serves
	// (BenchmarkCreateAskHandler measures it), so while nothing fails OK is this one load,
	// inlined, and takes no lock.
	if !g.failing.Load() {
		return
	}
	g.end(ctx, log, msg)
}

// end is OK while a failure may be under way.
func (g *Gate) end(ctx context.Context, log *slog.Logger, msg string) {
	g.mu.Lock()
	if !g.failing.Load() { // another OK ended it meanwhile
		g.mu.Unlock()
		return
	}
	g.failing.Store(false)
	failures, since := g.failures, g.since
	g.mu.Unlock()
	countKey := g.CountKey
	if countKey == "" {
		countKey = "failures"
	}
	if g.DurationKey == "" {
		log.InfoContext(ctx, msg, countKey, failures)
		return
	}
	log.InfoContext(ctx, msg, countKey, failures, g.DurationKey, time.Since(since).Milliseconds())
}
