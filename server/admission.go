package server

import (
	"context"

	"github.com/labstack/echo/v4"
)

// Admission of creates while the replica drains. Once Shutdown has begun, this replica makes
// nothing new: a create (createConversation, createAsk) is refused before anything is made,
// with errShuttingDown, which errorHandler answers 503 + Retry-After, or 421 to a gateway that
// sends RerouteHeader (the one place that choice is made), so that another replica may make it.
// admitCreate is the one place that refusal is decided, at one of two moments:
//
//   - a request without an Idempotency-Key, in admission (admitting, the middleware of both
//     creates), before its body is read: nothing but the refusal could be answered it;
//   - a request with one, in its handler, once the key's record has been looked up and holds
//     nothing to answer. It is let through admission because it may be the retry of a create
//     made earlier, by this replica or another, whose client lost the answer (as a rolling
//     restart loses it): it is answered the recorded response, or what a stalled attempt made,
//     like any other keyed retry. Until 2026-12-06 it was refused in admission too, and a
//     client that lost its 202 could not learn the ticket of the run still going through the
//     grace.
//
// A create route calls admitCreate in its handler after its key's lookup, and has admitting
// among its middleware; an ask's handler calls it for every request, keyed or not, as it
// reserves the ask's admission slot in the same step (see admitCreate).

// admitting is admission: while the replica drains it refuses a create that carries no
// Idempotency-Key (admitCreate); one with a key is let through to its handler, which admits it
// once its key has nothing to answer.
func (s *Server) admitting() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if c.Request().Header.Get("Idempotency-Key") == "" {
				if err := s.admitCreate(c.Request().Context(), nil, false); err != nil {
					return err
				}
			}
			return next(c)
		}
	}
}

// admitCreate admits a create, or refuses it with errShuttingDown once Shutdown has begun.
//
// ik is the create's key record, nil without a key. A refusal frees it (the record would
// otherwise answer 409 "still in progress" to the retry another replica takes, until its lock
// lapsed); one this request took over from a stalled attempt (ik.prev) goes back to that
// attempt, which may yet make what it was making (store.Idempotency's AbandonIdempotent,
// TestDrainingKeepsATakenOverKey).
//
// hold reserves an admission slot (an ask's, given back by release) in the same step, under
// s.mu, as Shutdown sets draining and reads the slots: no ask is admitted after Shutdown has
// found none active and stopped waiting for them.
func (s *Server) admitCreate(ctx context.Context, ik *idem, hold bool) error {
	s.mu.Lock()
	draining := s.draining
	if hold && !draining {
		s.active++
	}
	s.mu.Unlock()
	if !draining {
		return nil
	}
	if ik != nil {
		ik.abandon(ctx)
	}
	return errShuttingDown
}
