package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/das-ask/ask/store"
)

// A run on a shared store holds a lease on its ticket: it renews it every third of the lease,
// and stops as soon as another replica ends the log (a cancel it received, or a lapse it
// noticed). Both are kept without a goroutine of the run's own while nothing is to be done: a
// timer renews, and the store calls back when the log may have ended (store/redis
// NotifyFinished: an end notification). Most runs end before their first renewal, and their
// own end is the one notification they get, so a run costs a timer and a registration, not a
// second goroutine blocked for its whole life with a ticker of its own, woken by its own end:
// half the goroutines a replica holds for its running asks, and a wake-up less per ask. Work
// that blocks (a renewal, a read of the flag, a lost run's restore) goes on a goroutine
// counted in s.runners, started only when there is work.

// finishNotifier is a shared store that calls back when a ticket may have finished: f is
// called once, on the store's own goroutine (it must not block), after the call reported the
// ticket unfinished; stop takes f off. store/redis has it.
type finishNotifier interface {
	NotifyFinished(ctx context.Context, ticket string, f func()) (finished bool, stop func() bool, err error)
}

// finishWatcher is a shared store that tells whether a ticket is finished without reading its
// log, with a channel closed only when it may have finished since.
type finishWatcher interface {
	WatchFinished(ctx context.Context, ticket string) (finished bool, changed <-chan struct{}, err error)
}

// notifyFunc is finishNotifier's method.
type notifyFunc func(ctx context.Context, ticket string, f func()) (finished bool, stop func() bool, err error)

// lease is one run's hold on its ticket.
type lease struct {
	s      *Server
	r      *run
	sh     store.Shared
	ctx    context.Context // the run's: once it is done, nothing more is renewed or watched
	every  time.Duration
	notify notifyFunc

	mu       sync.Mutex
	released bool        // the run's goroutine is past the run: nothing more starts
	timer    *time.Timer // the next renewal
	stop     func() bool // takes the watch's function off, while one is registered
	watching bool        // a watch is registered, or being registered
	rewatch  bool        // the last watch failed: the next renewal watches again
}

// hold starts r's lease: the watch at once (for a ticket this instance created, no read), the
// first renewal a third of the lease from now. The run's goroutine calls the returned release
// once the run is over, before it counts itself out of s.runners.
func (s *Server) hold(ctx context.Context, r *run, sh store.Shared) (release func()) {
	l := &lease{s: s, r: r, sh: sh, ctx: ctx, every: max(sh.Lease()/3, 10*time.Millisecond)}
	switch st := sh.(type) {
	case finishNotifier:
		l.notify = st.NotifyFinished
	case finishWatcher:
		l.notify = s.notifyByChannel(st.WatchFinished)
	default:
		l.notify = s.notifyByChannel(finishedByRead(sh))
	}
	l.mu.Lock()
	l.timer = time.AfterFunc(l.every, l.renew)
	l.mu.Unlock()
	l.watch()
	return l.release
}

// release stops the lease: no renewal or watch starts after it returns.
func (l *lease) release() {
	l.mu.Lock()
	l.released = true
	l.timer.Stop()
	stop := l.stop
	l.stop = nil
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// watch registers l.changed on the ticket's end, unless a watch is registered already, and
// acts on what the store answers now.
func (l *lease) watch() {
	l.mu.Lock()
	if l.watching || l.released {
		l.mu.Unlock()
		return
	}
	l.watching = true
	l.mu.Unlock()
	finished, stop, err := l.notify(l.ctx, l.r.ticket, l.changed)
	l.mu.Lock()
	if stop != nil && l.released {
		l.mu.Unlock()
		stop()
		return
	}
	l.stop, l.watching = stop, stop != nil
	l.rewatch = err != nil && !errors.Is(err, store.ErrNotFound)
	l.mu.Unlock()
	switch {
	case err == nil && finished:
		l.r.endedElsewhere() // a no-op when this replica ended it
	case errors.Is(err, store.ErrNotFound):
		// The ticket vanished while it runs: the store lost it (a restart). The run stops and
		// restores it, ended error{interrupted}, so that it does not vanish.
		l.r.lose(err, 0)
	case err != nil && l.ctx.Err() == nil:
		l.s.log.Warn("run's log not readable; retrying at the next renewal", "ticket", l.r.ticket, "err", err)
	}
}

// changed is the store's call: the log may have ended. The run's own end (most often this
// very notification) needs nothing: the end's write learns whether another replica ended the
// log first, so the watch is not registered again; renewals go on. Anything else is read.
func (l *lease) changed() {
	l.mu.Lock()
	l.stop, l.watching = nil, false
	l.mu.Unlock()
	if l.ctx.Err() != nil || l.r.endingHere() {
		return
	}
	l.spawn(l.watch)
}

// renew is the timer's call: it renews the lease, watches again after a failed watch, and
// sets the next renewal.
func (l *lease) renew() {
	l.mu.Lock()
	if l.released || l.ctx.Err() != nil {
		l.mu.Unlock()
		return
	}
	l.s.runners.Add(1)
	rewatch := l.rewatch
	l.mu.Unlock()
	defer l.s.runners.Done()
	sent := time.Now()
	switch err := l.sh.Renew(l.ctx, l.r.ticket, l.r.usage()); {
	case err == nil:
		l.r.wrote(sent)
		l.s.renewLog.OK(l.ctx, l.s.log, "leases renewed again")
	case errors.Is(err, store.ErrFinished):
		l.r.endedElsewhere()
		return
	case errors.Is(err, store.ErrNotFound):
		l.r.lose(err, 0) // the store lost the ticket: restore it, ended
		return
	case l.ctx.Err() == nil:
		// One line for the failure's first renewal, then one a minute at most (renewLog): each
		// running ask's renewal warned at each of its ticks, so 100 running asks wrote some 500
		// lines in a 20 s Redis outage. The ticket named is one of those whose lease waits.
		l.s.renewLog.Fail(l.ctx, l.s.log, "lease not renewed; retrying", "ticket", l.r.ticket, "err", err)
	}
	if rewatch {
		l.watch()
	}
	l.mu.Lock()
	if !l.released {
		// Every third of the lease from the last renewal's start, as a ticker would.
		l.timer.Reset(max(l.every-time.Since(sent), 0))
	}
	l.mu.Unlock()
}

// spawn runs f on a goroutine counted in s.runners, unless the lease is released. The run's
// goroutine, counted there until after release, is alive whenever it adds one.
func (l *lease) spawn(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return
	}
	l.s.runners.Add(1)
	go func() {
		defer l.s.runners.Done()
		f()
	}()
}

// notifyByChannel gives a store that hands out a channel instead (a finishWatcher, or a read
// of the log) the callback form, with a goroutine that waits on the channel, counted in
// s.runners. It is called from a goroutine counted there.
func (s *Server) notifyByChannel(watch func(context.Context, string) (bool, <-chan struct{}, error)) notifyFunc {
	return func(ctx context.Context, ticket string, f func()) (bool, func() bool, error) {
		finished, ch, err := watch(ctx, ticket)
		if err != nil || finished {
			return finished, nil, err
		}
		quit := make(chan struct{})
		var once sync.Once
		stop := func() (stopped bool) {
			once.Do(func() { close(quit); stopped = true })
			return stopped
		}
		s.runners.Add(1)
		go func() {
			defer s.runners.Done()
			select {
			case <-ch:
				if stop() {
					f()
				}
			case <-quit:
			case <-ctx.Done():
			}
		}()
		return false, stop, nil
	}
}

// finishedByRead watches a store that cannot answer the finished flag alone: it reads the log
// on from the last event it saw, woken by every change.
func finishedByRead(sh store.Shared) func(context.Context, string) (bool, <-chan struct{}, error) {
	cursor := int64(0)
	return func(ctx context.Context, ticket string) (bool, <-chan struct{}, error) {
		b, err := sh.Read(ctx, ticket, cursor)
		if err != nil {
			return false, nil, err
		}
		if n := len(b.Events); n > 0 {
			cursor = b.Events[n-1].Seq
		}
		return b.Finished, b.Changed, nil
	}
}
