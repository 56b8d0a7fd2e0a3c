// Package logthrottle bounds the log lines of a failure that recurs at every tick of a
// background loop (a sweep, a poll) while a dependency is away: its first occurrence is logged
// at once, then one line per interval at most, counting the ones not logged, and its end once.
// A loop that logged every failed tick wrote a line every few seconds for as long as Redis was
// away, burying the few lines that said what happened.
package logthrottle

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Gate is one recurring failure's state. The zero value is ready to use, with Every 0 meaning
// DefaultEvery. Safe for concurrent use.
type Gate struct {
	// Every is the least time between two lines of the failure after its first.
	Every time.Duration

	mu         sync.Mutex
	failing    bool
	last       time.Time
	failures   int // since the failure began
	suppressed int // since its last line
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
	if !g.failing {
		g.failing, g.failures, g.suppressed, g.last = true, 0, 0, time.Time{}
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

// OK records a success; the first after a failure logs msg at info level with failures, the
// occurrences of the failure that it ends.
func (g *Gate) OK(ctx context.Context, log *slog.Logger, msg string) {
	g.mu.Lock()
	if !g.failing {
		g.mu.Unlock()
		return
	}
	g.failing = false
	failures := g.failures
	g.mu.Unlock()
	log.InfoContext(ctx, msg, "failures", failures)
}
