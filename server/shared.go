package server

import (
	"context"
	"errors"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// With a store.Shared (several replicas behind one gateway), each run executes on the replica
// that admitted it, and that replica holds the run's lease: hold renews it and watches the
// log, so that when another replica ends the log (a cancel it received, or a lapse it noticed)
// the run stops making model calls at once. Every replica sweeps for lapsed leases and ends
// those runs with error{interrupted} and done; the store makes that end atomic, so it happens
// exactly once however many replicas notice, and fences off a runner that comes back.

// sweepLimit is how many lapsed tickets one sweep ends.
const sweepLimit = 100

// remoteEndAttempts bounds how often endRemote re-reads a log its runner keeps appending to.
const remoteEndAttempts = 8

// finishWatcher is a shared store that tells whether a ticket is finished without reading its
// log, with a channel closed only when it may have finished since (store/redis: an end is
// notified on its own channel, so the runner's own appends wake nothing).
type finishWatcher interface {
	WatchFinished(ctx context.Context, ticket string) (finished bool, changed <-chan struct{}, err error)
}

// hold renews r's lease every third of it and ends r's part as soon as the log is ended
// elsewhere. It returns when ctx (the run's) is done or the log has ended.
func (s *Server) hold(ctx context.Context, r *run, sh store.Shared) {
	tick := time.NewTicker(max(sh.Lease()/3, 10*time.Millisecond))
	defer tick.Stop()
	watch := finishedByRead(sh)
	if fw, ok := sh.(finishWatcher); ok {
		watch = fw.WatchFinished
	}
	var changed <-chan struct{}
	rewatch := true
	for {
		if rewatch {
			finished, ch, err := watch(ctx, r.ticket)
			switch {
			case err == nil && finished:
				r.endedElsewhere() // a no-op when this replica ended it
				return
			case errors.Is(err, store.ErrNotFound):
				// The ticket vanished while it runs: the store lost it (a restart). The run
				// stops and restores it, ended error{interrupted}, so that it does not vanish.
				r.lose(err, 0)
				return
			case err != nil && ctx.Err() == nil:
				s.log.Warn("run's log not readable; retrying at the next renewal", "ticket", r.ticket, "err", err)
			}
			changed = ch
		}
		rewatch = true
		select {
		case <-ctx.Done():
			return
		case <-changed:
			if r.endingHere() {
				// The run is writing its own end (most often this very notification): the
				// end's write learns whether another replica ended the log first, so the
				// watch has nothing to add and is not read again; renewals go on.
				changed, rewatch = nil, false
			}
		case <-tick.C:
			sent := time.Now()
			switch err := sh.Renew(ctx, r.ticket, r.usage()); {
			case err == nil:
				r.wrote(sent)
			case errors.Is(err, store.ErrFinished):
				r.endedElsewhere()
				return
			case errors.Is(err, store.ErrNotFound):
				r.lose(err, 0) // the store lost the ticket: restore it, ended
				return
			case err != nil && ctx.Err() == nil:
				s.log.Warn("lease not renewed; retrying", "ticket", r.ticket, "err", err)
			}
		}
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

// sweep ends, every quarter of a lease, the runs whose lease has lapsed, until the server
// shuts down.
func (s *Server) sweep(sh store.Shared) {
	tick := time.NewTicker(max(sh.Lease()/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-s.base.Done():
			return
		case <-tick.C:
		}
		ids, err := sh.Lapsed(s.base, sweepLimit)
		if err != nil {
			if s.base.Err() == nil {
				s.log.Warn("lapsed leases not listed", "err", err)
			}
			continue
		}
		for _, id := range ids {
			out := errOutcome(gen.ErrorKindInterrupted, "the replica running the ask stopped before it finished")
			switch err := s.endRemote(s.base, sh, id, out, true); {
			case err == nil:
				s.log.Warn("ask interrupted: its replica's lease lapsed", "ticket", id)
			case errors.Is(err, store.ErrFinished), errors.Is(err, store.ErrLeaseHeld), errors.Is(err, store.ErrNotFound):
				// Another replica got there first, or the runner renewed in time.
			case s.base.Err() == nil:
				s.log.Warn("lapsed ask not ended; retrying at the next sweep", "ticket", id, "err", err)
			}
		}
	}
}

// endRemote ends a running ticket this replica does not run with out (an error outcome):
// the supervisor branch's close, the terminal event and done, appended atomically by the
// store if the log has not moved meanwhile (else it reads again and retries). done counts the
// steps in the log and the model calls and tokens of the runner's last lease renewal.
func (s *Server) endRemote(ctx context.Context, sh store.Shared, ticket string, out ask.Outcome, lapsedOnly bool) error {
	if t, err := sh.Ticket(ctx, ticket); err != nil || t.Finished() {
		return cmpOr(err, store.ErrFinished)
	}
	question, err := sh.Question(ctx, ticket)
	if err != nil {
		return err
	}
	for range remoteEndAttempts {
		t, err := sh.Ticket(ctx, ticket)
		if err != nil {
			return err
		}
		if t.Finished() {
			return store.ErrFinished
		}
		u, err := sh.Usage(ctx, ticket)
		if err != nil {
			return err
		}
		now := time.Now()
		open, err := branchesOpenIn(ctx, sh, ticket, t.LastSeq)
		if err != nil {
			return err
		}
		tail, typ, bad := finalEvents(envelope{ticket: ticket, conv: t.ConversationID, ts: now}, t.LastSeq, open.closes(), out, u, now.Sub(t.CreatedAt))
		if bad != nil {
			return bad
		}
		turn := ask.Turn{Question: question, Outcome: typ, Text: turnText(out)}
		if err = sh.End(ctx, ticket, tail, turn, lapsedOnly); err == nil {
			s.webhookDue(ticket)
			if h := s.opts.Hooks.Ended; h != nil {
				e := endOf(tail, out, u, now.Sub(t.CreatedAt), 0)
				e.Remote = true
				h(ticket, e)
			}
		}
		if !errors.Is(err, store.ErrSeq) {
			return err
		}
	}
	return store.ErrSeq
}

// cmpOr returns err, or alt when err is nil.
func cmpOr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}
