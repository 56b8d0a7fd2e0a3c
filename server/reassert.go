package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/store"
)

// A durable Redis (appendfsync everysec) that crashes may come back without its last second or
// two of writes, the ends of asks that had finished among them: the runner, which wrote the
// end and forgot the run, was the only one to know the seqs it had assigned, so the lease sweep
// ended such a ticket again, error{interrupted} at seqs its client had read with other events
// (its turn interrupted, its webhook sent again with that end), and a ticket created and ended
// within that second read 404 for good (docs/scale-out.md, "What a lost last second does to
// asks that had ended"). So the replica keeps what each run it finished wrote last, for
// reassertKeep, and when its store says it reconnected (reconnector) it reads each such ticket
// and writes the end again where the store no longer holds it (store.Shared.Restore, after the
// seqs the store kept: the events it lost leave a gap, no seq is reused), in the order the
// runs ended, so that a conversation's turns come back in order. Meanwhile, for a lease, its
// sweep ends no lapsed run, so that the ticket is not ended first at the store's last seq.
// What the store no longer holds because its TTL passed (DAS_ASK_TTL_S after the end, or after
// a key's first use) is not lost but expired, and stays gone: a replica frozen past the TTL
// (SIGSTOP, a long pause) that reconnects on waking took such a ticket for one Redis had lost,
// and wrote it back, answered again for another TTL, its key's record with it (audit,
// 2026-12-06: DAS_ASK_TTL_S=4, the replica stopped for 7 s).

// reassertKeep is how long a finished run's end is kept for a restart that lost it: Redis's
// everysec fsync postpones a write by up to 2 s while a background fsync is slow.
const reassertKeep = 10 * time.Second

// reconnector is a store that says when it reconnected (store/redis.Store.Reconnects).
type reconnector interface {
	Reconnects() <-chan struct{}
}

// finishedEnd is what a finished run wrote last, to write it again.
type finishedEnd struct {
	r    *run
	tail []store.Event
	turn ask.Turn
	at   time.Time
	// expires is when the store lets the end expire, at the latest: the TTL from its write.
	expires time.Time
}

// recent is what the replica wrote within reassertKeep, in the order it was written: the ends
// of its runs, the records of its keyed creates.
type recent[T interface{ writtenAt() time.Time }] struct {
	mu    sync.Mutex
	items []T
}

// add records v, written now, dropping those older than reassertKeep. While the store is away
// nothing is written, so what was written before it went stays until it is back.
func (r *recent[T]) add(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := 0
	for i < len(r.items) && v.writtenAt().Sub(r.items[i].writtenAt()) > reassertKeep {
		i++
	}
	r.items = append(r.items[i:], v)
}

// since is what was recorded, oldest first, less than reassertKeep before healthy (when the
// store last answered a sweep: what was written earlier had been on disk by then).
func (r *recent[T]) since(healthy time.Time) []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []T
	for _, v := range r.items {
		if healthy.Sub(v.writtenAt()) <= reassertKeep {
			out = append(out, v)
		}
	}
	return out
}

func (e finishedEnd) writtenAt() time.Time { return e.at }

// keyedCreate is a create made under an Idempotency-Key whose record was completed: what it
// takes to write that record again.
type keyedCreate struct {
	owner  store.Owner
	key    string
	fp     string
	ticket string
	rec    []byte
	at     time.Time
	// expires is when the store lets the record expire, at the latest: the TTL from its first
	// use, which came no later than this create's begin.
	expires time.Time
}

func (k keyedCreate) writtenAt() time.Time { return k.at }

// keyedCreated records the completed record of a keyed create of a ticket: a restart that
// loses it would make a retry with the key, whose 202 was lost with it, create another ticket
// and run the question again (reassertPass writes it again).
func (s *Server) keyedCreated(ik *idem, ticket string, rec []byte) {
	if isShared(s.store) {
		s.keyed.add(keyedCreate{owner: ik.owner, key: ik.key, fp: ik.fp, ticket: ticket, rec: rec, at: time.Now(), expires: ik.began.Add(s.opts.TTL)})
	}
}

// reputKeyed writes k's record again if the store no longer holds it (nor another attempt's
// with the key) and its TTL has not passed; it reports false while the store is unavailable.
func (s *Server) reputKeyed(k keyedCreate) bool {
	if !time.Now().Before(k.expires) {
		return true // expired, not lost: a retry with the key is a new request
	}
	// Written again to expire when the lost one would have, not a whole TTL from now.
	ttl := max(time.Until(k.expires), time.Millisecond)
	res, err := s.store.BeginIdempotent(s.base, k.owner, k.key, store.IdemBegin{Fingerprint: k.fp, Candidate: k.ticket, Lock: idemLock, TTL: ttl})
	switch {
	case errors.Is(err, store.ErrUnavailable):
		return false
	case err != nil:
		s.log.Warn("idempotency record not read after the store reconnected", "ticket", k.ticket, "err", err)
		return true
	case res.State != store.IdemNew:
		return true // kept (or another attempt's: then a retry answers that)
	}
	if err := s.store.CompleteIdempotent(s.base, k.owner, k.key, res.ID, k.ticket, k.rec); err != nil {
		if errors.Is(err, store.ErrUnavailable) {
			return false
		}
		s.log.Warn("idempotency record not written again after the store lost it", "ticket", k.ticket, "err", err)
		return true
	}
	s.log.Warn("idempotency record written again: the store had lost it", "ticket", k.ticket)
	return true
}

// runFinished records r's end, written (run.finish).
func (s *Server) runFinished(r *run, tail []store.Event, turn ask.Turn) {
	now := time.Now()
	s.finished.add(finishedEnd{r: r, tail: tail, turn: turn, at: now, expires: now.Add(s.opts.TTL)})
}

// reassertOnReconnect writes again, at each reconnection of rc, the ends the store lost; and
// at each kick (the sweep finding Redis restarted lately, a run finding its own log lost).
func (s *Server) reassertOnReconnect(sh store.Shared, rc reconnector) {
	for {
		select {
		case <-s.base.Done():
			return
		case <-rc.Reconnects():
			s.reconnectedAt.Store(time.Now().UnixNano())
		case <-s.reassertKick:
		}
		s.passes.mu.Lock()
		s.passes.started++
		n := s.passes.started
		s.passes.mu.Unlock()
		s.reassertPass(sh)
		s.passes.mu.Lock()
		s.passes.done = n
		if s.passes.changed != nil {
			close(s.passes.changed)
			s.passes.changed = nil
		}
		s.passes.mu.Unlock()
	}
}

// reassertPass writes again, in the order the runs ended, the ends the store no longer holds.
func (s *Server) reassertPass(sh store.Shared) {
	s.holdSweepUntil.Store(time.Now().Add(sh.Lease()).UnixNano())
	// What was written reassertKeep before the store last answered a sweep had been on disk
	// by then: not read again (nor re-created, once it has expired).
	healthy := time.Unix(0, s.sweptAt.Load())
	// The records of keyed creates first: a retry with the key that comes before its record
	// is back makes another ticket, while one that reads a ticket not yet written again waits
	// for it (awaitRestored), and this pass writes it next.
	for _, k := range s.keyed.since(healthy) {
		s.untilStoreBack(func() bool { return s.reputKeyed(k) })
	}
	for _, e := range s.finished.since(healthy) {
		s.untilStoreBack(func() bool { return s.reassert(sh, e) })
	}
}

// reassertPasses counts the passes of reassertOnReconnect, for a run that waits for one.
type reassertPasses struct {
	mu      sync.Mutex
	started uint64
	done    uint64        // the last pass finished
	changed chan struct{} // closed when done changes; made by a waiter
}

// reassertFirst runs a pass of reassertOnReconnect that starts after this call, and waits for
// it (or for the server's end). A run that finds its own log lost (a restart) calls it before
// it restores that log: the ends this replica wrote before it, which the restart may have lost
// too, go back first, so that its conversation's turns come back in order (an earlier ask's
// end re-written after a later ask's restore would hold the conversation then, and the later
// turn would be left out). Runs finding their logs lost at once share a pass.
func (s *Server) reassertFirst() {
	s.passes.mu.Lock()
	want := s.passes.started + 1
	s.passes.mu.Unlock()
	select {
	case s.reassertKick <- struct{}{}:
	default: // a kick is pending: its pass starts after this call
	}
	for {
		s.passes.mu.Lock()
		if s.passes.done >= want {
			s.passes.mu.Unlock()
			return
		}
		if s.passes.changed == nil {
			s.passes.changed = make(chan struct{})
		}
		ch := s.passes.changed
		s.passes.mu.Unlock()
		select {
		case <-ch:
		case <-s.base.Done():
			return
		}
	}
}

// reassert writes e's end again if the store no longer holds it and its TTL has not passed; it
// reports false while the store is unavailable.
func (s *Server) reassert(sh store.Shared, e finishedEnd) bool {
	if !time.Now().Before(e.expires) {
		return true // expired, not lost: gone, as every ticket is its TTL after its end
	}
	done := e.tail[len(e.tail)-1].Seq
	t, err := sh.Ticket(s.base, e.r.ticket)
	switch {
	case err == nil && t.Finished() && t.Done != nil && t.Done.Seq == done:
		return true // kept
	case errors.Is(err, store.ErrNotFound) && s.lostID(s.base, e.r.ticket):
		// A Redis that lost everything (memory-only, restarted): what it held is gone, as
		// every finished ticket and conversation of that generation is (docs/scale-out.md).
		return true
	case errors.Is(err, store.ErrUnavailable):
		return false
	case err != nil && !errors.Is(err, store.ErrNotFound):
		s.log.Warn("ended ask not read after the store reconnected", "ticket", e.r.ticket, "err", err)
		return true
	case err == nil && t.Finished():
		// Ended otherwise first (a sweep that did not hold): nothing to do but say so.
		s.log.Warn("ended ask found ended otherwise after the store lost its end", "ticket", e.r.ticket)
		return true
	}
	if err := sh.Restore(s.base, e.r.admitted, e.tail, e.turn); err != nil {
		if errors.Is(err, store.ErrUnavailable) {
			return false
		}
		s.log.Warn("ended ask's end not written again after the store lost it", "ticket", e.r.ticket, "err", err)
		return true
	}
	if e.r.reWebhook != nil {
		if err := e.r.reWebhook(s.base); err != nil {
			s.log.Warn("ask's webhook not registered again after the store lost it", "ticket", e.r.ticket, "err", err)
		}
	}
	s.webhookDue(e.r.ticket)
	s.log.Warn("ended ask's end written again: the store had lost it", "ticket", e.r.ticket)
	return true
}

// restartAware is a store that tells a Redis restarted lately (store/redis.Store.RestartedWithin).
type restartAware interface {
	RestartedWithin(ctx context.Context, d time.Duration) (bool, error)
}

// lostWindow is, in leases, how long after its store reconnected, or its Redis started, a
// replica deems that the store may have lost writes it had acknowledged (lostWritesLately): a
// run whose replica died with Redis is ended within about two (its lease lapses, and the sweep
// holds for one), and a reader resuming after that finds it finished.
const lostWindow = 3

// lostWritesLately reports whether the store may lately have lost writes it had acknowledged:
// it said it reconnected, or its Redis started, less than lostWindow leases ago.
func (s *Server) lostWritesLately(ctx context.Context) bool {
	sh, ok := s.store.(store.Shared)
	if !ok {
		return false
	}
	window := lostWindow * sh.Lease()
	if time.Since(time.Unix(0, s.reconnectedAt.Load())) < window {
		return true
	}
	ra, ok := sh.(restartAware)
	if !ok {
		return false
	}
	rctx, cancel := s.storeBound(ctx)
	defer cancel()
	restarted, err := ra.RestartedWithin(rctx, window)
	return err == nil && restarted
}

// sweepHeld reports whether the sweep waits: for a lease after the store reconnected, and
// while its Redis has run for less than a lease (its notifications' subscription may come back
// after the sweep's first look; the reassertion is asked for then too).
func (s *Server) sweepHeld(sh store.Shared) bool {
	if time.Now().UnixNano() < s.holdSweepUntil.Load() {
		return true
	}
	if ra, ok := sh.(restartAware); ok {
		if restarted, err := ra.RestartedWithin(s.base, sh.Lease()); err == nil && restarted {
			select {
			case s.reassertKick <- struct{}{}:
			default:
			}
			return true
		}
	}
	return false
}
