package server

import (
	"context"
	"errors"
	"math/rand/v2"
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
		if s.sweepHeld(sh) {
			continue
		}
		ids, err := sh.Lapsed(s.base, sweepLimit)
		switch {
		case err == nil:
			s.sweptAt.Store(time.Now().UnixNano())
			s.sweepLog.OK(s.base, s.log, "lapsed leases listed again")
		case s.base.Err() != nil:
			continue
		default:
			// Some of the store did not answer (on a Redis Cluster, a slot being migrated or a
			// primary not yet replaced): the runs it did list are ended all the same, for one
			// bucket's fault kept every other bucket's dead runs running meanwhile. The sweep
			// does not count as the store's answer (sweptAt) until every part answered.
			// Bounded: the sweep ticks every quarter lease, for as long as the store is away.
			s.sweepLog.Fail(s.base, s.log, "lapsed leases not listed", "err", err, "listed", len(ids))
			if len(ids) == 0 {
				continue
			}
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
// steps in the log and the model calls and tokens of the runner's last lease renewal. The
// ask is its conversation's next turn, as every admitted ask is.
func (s *Server) endRemote(ctx context.Context, sh store.Shared, ticket string, out ask.Outcome, lapsedOnly bool) error {
	return s.endRemoteTurn(ctx, sh, ticket, out, lapsedOnly, true)
}

// endRemoteTurn is endRemote; without turn the ask leaves no turn in its conversation (an ask
// ended unrun whose request was answered that it was not started: endLate).
func (s *Server) endRemoteTurn(ctx context.Context, sh store.Shared, ticket string, out ask.Outcome, lapsedOnly, turn bool) error {
	if t, err := sh.Ticket(ctx, ticket); err != nil || t.Finished() {
		return cmpOr(err, store.ErrFinished)
	}
	var question string
	shredded := false
	if turn {
		switch q, err := sh.Question(ctx, ticket); {
		case errors.Is(err, store.ErrNotFound):
			// The ticket is there (read above) and its question is not: it no longer opens,
			// its seal key dropped (crypto-shredding), and nor does its log. It is ended all
			// the same, leaving no turn (a shredded turn is left out), for until 2026-12-05
			// nothing ended it: its conversation answered 409 naming a ticket that reads 404,
			// and its owner's in-flight slot stayed taken, for good. (A ticket gone since is
			// End's ErrNotFound.)
			turn, shredded = false, true
		case err != nil:
			return err
		default:
			question = q
		}
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
		open, last, err := branchesOpenIn(ctx, sh, ticket, t.LastSeq)
		if shredded && errors.Is(err, store.ErrNotFound) {
			// No reader can open the log: its end closes the supervisor branch alone.
			open, err = openBranches{}, nil
		}
		if err != nil {
			return err
		}
		// The end's ts is this replica's clock, but never before the ticket's creation or the
		// log's last event, which the admitting replica stamped on its own clock: replicas'
		// clocks differ, and one 30 s behind the runner's ended a killed replica's run with
		// events 25 s before its last step and 21 s before its created_at (an audit, two askd
		// on one Redis), where ts never decreases along seq (conformance events.ts-ordered).
		// So a run is never said to have taken less than nothing either (done.elapsed_ms has a
		// minimum of 0); one ended by a replica whose clock is ahead counts that skew in.
		now := latest(time.Now(), t.CreatedAt, last)
		elapsed := max(now.Sub(t.CreatedAt), 0)
		// After the floor, when a restart lost seqs readers were given (store.Ticket.Floor): the
		// end's events take none of them.
		tail, typ, bad := finalEvents(envelope{ticket: ticket, conv: t.ConversationID, ts: now}, max(t.LastSeq, t.Floor), open.closes(), out, u, elapsed)
		if bad != nil {
			return bad
		}
		var tn ask.Turn // the zero turn records none
		if turn {
			tn = ask.Turn{Question: question, Outcome: typ, Text: turnText(out)}
		}
		if err = sh.End(ctx, ticket, tail, tn, lapsedOnly); err == nil {
			s.webhookDue(ticket)
			if h := s.opts.Hooks.Ended; h != nil {
				e := endOf(tail, out, u, elapsed, 0)
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

// latest is the latest of ts by their wall clock readings.
func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t = t.Round(0); t.After(l) {
			l = t
		}
	}
	return l
}

// cmpOr returns err, or alt when err is nil.
func cmpOr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}

// Waiting for a store that went away to come back, so that a run lost to it can be ended: the
// first wait and the longest.
const (
	recoverBackoffMin = 100 * time.Millisecond
	recoverBackoffMax = 5 * time.Second
)

// recoverLost ends r, a run this replica gave up because the store took none of its writes for
// longer than its lease, once the store answers again, until the server shuts down. A ticket
// the store still holds is ended as a lapsed one would be: error{interrupted} and done after
// the last event the store took, so the log has no gap (unless another replica's sweep ended it
// first). A ticket the store no longer holds (a Redis restarted without persistence while it
// was away) is re-created and ended error{interrupted} after every seq the run assigned, as a
// restart noticed by a write is (run.restoreVia): a ticket whose 202 was sent never vanishes. The
// end is reported once, when it is known.
func (s *Server) recoverLost(r *run) {
	sh, ok := s.store.(store.Shared)
	if !ok {
		r.reportEnd(End{Reason: "store_error"})
		return
	}
	out := errOutcome(gen.ErrorKindInterrupted, "the service's store was unreachable for longer than the ask's lease; the events it did not take are not in the log")
	try := func() bool {
		err := s.endRemote(s.base, sh, r.ticket, out, false)
		switch {
		case err == nil:
			s.log.Warn("ask interrupted: the store was away past its lease", "ticket", r.ticket)
			return true
		case errors.Is(err, store.ErrFinished):
			r.reportEnd(End{Reason: "ended_elsewhere"})
			return true
		case errors.Is(err, store.ErrNotFound):
			return s.restoreOnce(r)
		case !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, store.ErrSeq):
			s.log.Error("lost ask not ended", "ticket", r.ticket, "err", err)
			r.reportEnd(End{Reason: "store_error"})
			return true
		}
		return false
	}
	if !s.whenStoreBack(try, func(ended bool) {
		if !ended {
			r.reportEnd(End{Reason: "store_error"})
		}
	}) {
		r.reportEnd(End{Reason: "store_error"}) // shut down: the lease's sweep is the backstop
	}
}

// restoreLater restores r, a run whose log the store lost (a restart) and whose restore
// (run.restoreVia) the store refused for longer than the lease, once the store takes it, until
// the server shuts down: re-created and ended error{interrupted} + done after every seq the
// run assigned, as run.restoreVia does, so that a ticket whose 202 was sent never vanishes. The
// refusal that lasts is typically a Redis restarted empty that persists to disk while the
// service does not seal: the restore carries the turn's question, so the store refuses it
// (503s for creates meanwhile) until Redis runs memory-only again. The end is reported once,
// when it is known.
func (s *Server) restoreLater(r *run) {
	if !s.whenStoreBack(func() bool { return s.restoreOnce(r) }, func(restored bool) {
		if !restored {
			r.reportEnd(End{Reason: "store_error"})
		}
	}) {
		r.reportEnd(End{Reason: "store_error"}) // shut down, as untilStoreBack would say
	}
}

// restoreOnce tries r's restore once (run.restoreVia): it reports whether that settled the
// run's end (restored, ended by another replica, or refused for good, each reported), false
// while the store is unavailable.
func (s *Server) restoreOnce(r *run) bool {
	switch err := r.restoreVia(func(op func(context.Context) error) error { return op(s.base) }); {
	case err == nil:
		// The run was released before this restore: its webhook, registered again with it,
		// is made due here.
		s.webhookDue(r.ticket)
		return true
	case errors.Is(err, store.ErrFinished):
		r.reportEnd(End{Reason: "ended_elsewhere"})
		return true
	case !errors.Is(err, store.ErrUnavailable):
		r.reportEnd(End{Reason: "store_error"})
		return true
	}
	return false
}

// whenStoreBack runs try on a runner goroutine (which Shutdown waits for) until it reports that
// it is done (untilStoreBack), then, when then is not nil, then(done): done is false when the
// server shut down first. It reports false, starting nothing, when the server has already shut
// down: the caller settles what the goroutine would have.
func (s *Server) whenStoreBack(try func() (done bool), then func(done bool)) bool {
	if !s.addRunner() {
		return false
	}
	go func() {
		defer s.runners.Done()
		done := s.untilStoreBack(try)
		if then != nil {
			then(done)
		}
	}()
	return true
}

// untilStoreBack calls try until it reports that it is done, waiting between tries with
// jittered backoff from recoverBackoffMin to recoverBackoffMax, for a store that went away to
// come back. It reports false when the server shut down first.
func (s *Server) untilStoreBack(try func() (done bool)) bool {
	backoff := recoverBackoffMin
	for !try() {
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-s.base.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		backoff = min(2*backoff, recoverBackoffMax)
	}
	return true
}

// createBound is the context of a create without an Idempotency-Key: the request's values,
// not its cancellation (a caller that leaves mid-create does not cut the store's work in
// half), bounded by StoreWait. A store in this process never stalls: ctx as it is.
func (s *Server) createBound(ctx context.Context) (context.Context, context.CancelFunc) {
	if !isShared(s.store) {
		return ctx, noCancel
	}
	return context.WithTimeout(context.WithoutCancel(ctx), s.opts.StoreWait)
}

// storeBound bounds a request's store calls by StoreWait: a stalled store answers 503 then,
// under a gateway's read timeout, rather than after its client's own timeouts and retries. A
// store in this process never stalls: ctx as it is, without a timer.
func (s *Server) storeBound(ctx context.Context) (context.Context, context.CancelFunc) {
	if !isShared(s.store) {
		return ctx, noCancel
	}
	return context.WithTimeout(ctx, s.opts.StoreWait)
}

func noCancel() {}

// dropUnanswered removes conversation c, whose creation nobody was answered, once the store answers
// again: left alone, a conversation made all the same would sit empty, which nobody knows of,
// counted against its owner's conversations until its TTL. Two creations come to that: one the
// store did not answer (its reply lost, or not back within StoreWait: the create answered 503
// and its caller holds no conversation), and a keyed one whose record a retry took over while
// it stalled (the retry answered a conversation of its own, and the key answers that one from
// then on). The store removes it only if it is still as created (no ask, no turn), and keeps a
// creation still on its way from making it afterwards. It runs on a runner goroutine, retried
// with backoff while the store is away, until the server shuts down (the TTL is the
// backstop). what says in the log line which creation it was.
//
// lctx is the request's context without its cancel: the lines logged here carry the request's
// id (obs.LogHandler), so they are found from the answer the client got.
func (s *Server) dropUnanswered(lctx context.Context, c store.Conversation, what string) {
	d, ok := s.store.(store.ConversationDropper)
	if !ok {
		return // a store that cannot remove one: the TTL is the backstop
	}
	// Shut down, nothing is started: the TTL is the backstop.
	s.whenStoreBack(func() bool {
		switch dropped, err := d.DropConversation(s.base, c); {
		case err == nil && dropped:
			s.log.WarnContext(lctx, what+": removed", "conversation", c.ID)
		case err == nil:
		case errors.Is(err, store.ErrUnavailable):
			return false
		case s.base.Err() != nil:
		default:
			s.log.ErrorContext(lctx, what+": not removed", "conversation", c.ID, "err", err)
		}
		return true
	}, nil)
}

// The creations dropUnanswered removes, as its log lines name them.
const (
	dropGaveUp    = "conversation created after its request gave up on the store"
	dropTakenOver = "conversation of a keyed create taken over by a retry"
)

// endLate follows, on a runner goroutine holding the admission slot the create took, a
// ticket's creation that the store did not answer in time (CreateTicket's PendingError), which
// the request answered 503 "not started". If the store created the ticket after all (or
// cannot say), nobody will run or follow it, and left alone it would hold its conversation
// (409 for the next ask) and its owner's in-flight slot until its lease lapsed and a sweep
// ended it: it is ended at once, error{interrupted} + done after the events it was created
// with, retried with backoff while the store is away, until the server shuts down (the
// lease's sweep is the backstop). A ticket never created ends the wait. The ask leaves no
// turn in its conversation: its caller was told it was not started and will ask again, and
// the model should not then see the question twice, the first time unanswered (nor the turn
// count towards the conversation's cap). before, when not nil, runs first (the webhook's
// removal, which must precede an end that would make it due): it meets the store that just
// stalled, so a failure is retried while the store is away, and the ticket is not ended here
// before it succeeds (the lease's sweep is the backstop). lctx is the request's context without
// its cancel, for the lines logged here: they carry its request id, and name the ticket's
// conversation, so they are found from the 503 the client got.
func (s *Server) endLate(lctx context.Context, nt store.NewTicket, p *store.PendingError, before func(context.Context) error) {
	removed := func() bool { return true }
	if before != nil {
		removed = func() bool {
			switch err := before(s.base); {
			case err == nil:
			case errors.Is(err, store.ErrUnavailable):
				s.log.WarnContext(lctx, "webhook of an ask answered 'not started' not removed yet; retrying", "ticket", nt.ID, "conversation", nt.ConversationID, "err", err)
				return false
			default:
				s.log.ErrorContext(lctx, "webhook of an ask answered 'not started' not removed", "ticket", nt.ID, "conversation", nt.ConversationID, "err", err)
			}
			return true
		}
	}
	end := func(removedFirst bool) {
		defer s.release("")
		if !removedFirst {
			return // shutting down
		}
		if err := p.Outcome(s.base); err != nil && !errors.Is(err, store.ErrUnavailable) {
			return // refused: nothing was created (or the server is shutting down)
		}
		sh, ok := s.store.(store.Shared)
		if !ok {
			return
		}
		out := errOutcome(gen.ErrorKindInterrupted, "the service's store took the ask's creation after the request had been answered that it was not started; it was not run")
		s.untilStoreBack(func() bool {
			switch err := s.endRemoteTurn(s.base, sh, nt.ID, out, false, false); {
			case err == nil:
				s.log.WarnContext(lctx, "ask created after its request gave up on the store: ended unrun", "ticket", nt.ID, "conversation", nt.ConversationID)
			case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrFinished):
			case !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, store.ErrSeq):
				s.log.ErrorContext(lctx, "late-created ask not ended", "ticket", nt.ID, "conversation", nt.ConversationID, "err", err)
			default:
				return false
			}
			return true
		})
	}
	if !s.whenStoreBack(removed, end) {
		s.release("") // shut down: the lease's sweep is the backstop
	}
}
