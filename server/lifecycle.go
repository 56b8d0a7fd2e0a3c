package server

import (
	"context"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/store"
)

// newRun registers the run of an admitted ticket and returns it with the context it will run
// under: a child of the server's lifetime (never of the request), bounded by the deadline.
func (s *Server) newRun(ticket, conv, question string, admitted time.Time) (*run, context.Context) {
	deadlineCtx, cancelDeadline := context.WithTimeoutCause(s.base, s.opts.Deadline-time.Since(admitted), errTimeout)
	ctx, cancel := context.WithCancelCause(deadlineCtx)
	r := &run{
		store:     s.store,
		log:       s.log,
		ticket:    ticket,
		conv:      conv,
		question:  question,
		maxEvents: s.opts.MaxEvents,
		started:   admitted,
		seq:       1, // accepted
		nonStep:   1,
		onEnd:     func(r *run) { s.release(r.ticket); s.webhookDue(r.ticket) },
		ctx:       ctx,
		cancel: func(cause error) {
			cancel(cause)
			cancelDeadline()
		},
	}
	s.mu.Lock()
	s.runs[ticket] = r
	s.mu.Unlock()
	return r, ctx
}

// start runs r on its own goroutine, which Shutdown waits for.
func (s *Server) start(r *run, ctx context.Context, req ask.Request) {
	s.runners.Add(1)
	go func() {
		defer s.runners.Done()
		if ctx.Err() != nil { // shut down or timed out between admission and now
			r.end(outcomeFor(context.Cause(ctx)))
			r.cancel(context.Cause(ctx))
			return
		}
		r.execute(ctx, s.opts.Runner, req)
	}()
	if sh, ok := s.store.(store.Shared); ok {
		s.runners.Add(1)
		go func() {
			defer s.runners.Done()
			s.hold(ctx, r, sh)
		}()
	}
}
