package server

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// storeOutageLogEvery is how often, at most, a store outage logs another
// "store unavailable: request answered 503" line after its first.
const storeOutageLogEvery = 10 * time.Second

// storeOutage keeps the log of a store outage bounded: the first request the store could not
// serve is a warn line at once, then at most one every storeOutageLogEvery, which counts the
// 503s answered since the line before it (suppressed), however many requests arrive; the
// first request the store serves again ends the outage with an info line, so the log says when
// it ended and how many requests it cost. One line per 503 flooded the log at the request rate
// for as long as Redis was away, while saying nothing when it came back. Safe for concurrent
// use; served costs an atomic load while the store answers.
type storeOutage struct {
	active atomic.Bool

	mu         sync.Mutex
	since      time.Time // the outage's first 503
	last       time.Time // its last warn line
	answered   int       // 503s answered in it
	suppressed int       // 503s answered since its last warn line, not logged
}

// refused records a request answered 503 because the store did not serve it, and logs it
// unless a line was logged within storeOutageLogEvery.
func (o *storeOutage) refused(ctx context.Context, log *slog.Logger, method, route string, err error) {
	now := time.Now()
	o.mu.Lock()
	if !o.active.Load() {
		o.since, o.last, o.answered, o.suppressed = now, time.Time{}, 0, 0
		o.active.Store(true)
	}
	o.answered++
	if !o.last.IsZero() && now.Sub(o.last) < storeOutageLogEvery {
		o.suppressed++
		o.mu.Unlock()
		return
	}
	suppressed := o.suppressed
	o.last, o.suppressed = now, 0
	o.mu.Unlock()
	log.WarnContext(ctx, "store unavailable: request answered 503",
		"method", method, "route", route, "err", err, "suppressed", suppressed)
}

// served records a request the store served; the first after a 503 ends the outage.
func (o *storeOutage) served(log *slog.Logger) {
	if !o.active.Load() {
		return
	}
	o.mu.Lock()
	if !o.active.Load() {
		o.mu.Unlock()
		return
	}
	o.active.Store(false)
	answered, since := o.answered, o.since
	o.mu.Unlock()
	log.Info("store available again: requests served", "answered_503", answered,
		"unavailable_ms", time.Since(since).Milliseconds())
}
