package server

import (
	"cmp"
	"context"
	"sync/atomic"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/store"
)

// newRun registers the run of an admitted ticket and returns it with the context it will run
// under: a child of the server's lifetime (never of the request), bounded by the deadline.
//
// The context is one cancelCtx: whatever ends the run cancels it with its cause after sealing
// the log's end (run.stop: a cancel, the deadline's timer, shutdown; run.lose and
// endedElsewhere), so nothing waits on it to end the log. It reports the deadline
// (deadlineCtx), which a runner may plan its waits by.
//
// opened is the supervisor branch's open, which the store took with the ticket's creation
// (store.NewTicket.Then). The run knows it before its deadline's timer is armed: a timer that
// fires at once (a deadline already past) seals an end after that open, never a second open.
// admitted is nt's creation as the clock read it, monotonic reading and all. reWebhook, when
// the ask named a webhook, registers its delivery again for a restore (Server.reWebhook).
func (s *Server) newRun(nt store.NewTicket, opened store.Event, admitted time.Time, reWebhook func(context.Context) error) (*run, context.Context) {
	ticket, conv, question := nt.ID, nt.ConversationID, nt.Question
	deadline := admitted.Add(s.opts.Deadline)
	cctx, cancel := context.WithCancelCause(s.base)
	ctx := deadlineCtx{Context: cctx, deadline: deadline}
	r := &run{
		store:        s.store,
		async:        isShared(s.store),
		log:          s.log,
		ticket:       ticket,
		conv:         conv,
		question:     question,
		maxEvents:    s.opts.MaxEvents,
		started:      admitted,
		created:      cmp.Or(nt.CreatedAt, admitted).Round(0),
		seq:          1, // accepted
		onEnd:        s.runEnded,
		recoverLost:  s.recoverLost,
		restoreLater: s.restoreLater,
		hooks:        s.opts.Hooks,
		lease:        s.storeLease(),
		ctx:          ctx,
		admitted:     nt,
		reWebhook:    reWebhook,
	}
	if _, ok := s.store.(reconnector); ok {
		r.onFinished = s.runFinished
		r.beforeRestore = s.reassertFirst
	}
	r.openedWith(opened)
	// The timer may fire before AfterFunc returns (a deadline already past): r.cancel is set
	// first, and finds the timer once it is stored.
	var timer atomic.Pointer[time.Timer]
	r.cancel = func(cause error) {
		cancel(cause)
		if t := timer.Load(); t != nil {
			t.Stop()
		}
	}
	r.lastWrite.Store(admitted.UnixNano()) // the ticket's creation started its lease
	// Registered before the timer is armed: a timer that fires at once ends the run, and the
	// end's release must find it to remove it.
	s.mu.Lock()
	s.runs[ticket] = r
	s.mu.Unlock()
	timer.Store(time.AfterFunc(time.Until(deadline), func() { r.stop(errTimeout) }))
	return r, ctx
}

// runEnded lets an ended run's webhook go and gives its admission slot back, in that order:
// the last release lets Shutdown go on, and it then attempts the deliveries that are due.
func (s *Server) runEnded(r *run) {
	s.webhookDue(r.ticket)
	s.release(r.ticket)
}

// deadlineCtx is a run's context: its cancelCtx, reporting the run's deadline, which the
// run's timer enforces (newRun). Done, Err, Value and so context.Cause are the cancelCtx's,
// so contexts derived from it are its children as they would be of the cancelCtx.
type deadlineCtx struct {
	context.Context
	deadline time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) { return c.deadline, true }

// start runs r on its own goroutine, which Shutdown waits for.
func (s *Server) start(r *run, ctx context.Context, req ask.Request) {
	if !s.addRunner() {
		// Shutdown no longer waits for runners, and ctx has ended with it: ended here, unrun.
		r.end(outcomeFor(errShutdown))
		r.cancel(errShutdown)
		return
	}
	go s.execute(r, ctx, req)
}

// addRunner counts a goroutine about to start in s.runners, which Shutdown waits for, and
// reports true; false, counting nothing, once Shutdown waits for them. A request admitted
// before the shutdown may reach its goroutine's start after that wait began: counted then, it
// would start from a count the wait saw at zero (a WaitGroup's Add racing its Wait) and
// outlive the Shutdown that returned. A goroutine counted there may count more without it.
func (s *Server) addRunner() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.runnersDone {
		return false
	}
	s.runners.Add(1)
	return true
}

// execute is a run's goroutine (start), counted in s.runners.
func (s *Server) execute(r *run, ctx context.Context, req ask.Request) {
	defer s.runners.Done()
	if ctx.Err() != nil { // shut down or timed out between admission and now
		r.end(outcomeFor(context.Cause(ctx)))
		r.cancel(context.Cause(ctx))
		return
	}
	if sh, ok := s.store.(store.Shared); ok {
		defer s.hold(ctx, r, sh)()
	}
	run := ctx
	if h := s.opts.Hooks.Running; h != nil {
		run = h(ctx, r.ticket)
	}
	r.execute(run, s.opts.Runner, req)
}

// defaultStoreWait is how long a run waits for a store without a lease (store.Memory answers at
// once, so only a store.Store of another kind could make it wait) to take its writes.
const defaultStoreWait = 10 * time.Second

// storeLease is how long a run may wait for the store to take a write: the lease of a shared
// store, past which another replica may end the run anyway.
func (s *Server) storeLease() time.Duration {
	if sh, ok := s.store.(store.Shared); ok {
		return sh.Lease()
	}
	return defaultStoreWait
}

// isShared reports whether st is a shared store (a round trip away): the run's outbox is then
// written by a writer goroutine, in batches.
func isShared(st store.Store) bool {
	_, ok := st.(store.Shared)
	return ok
}
