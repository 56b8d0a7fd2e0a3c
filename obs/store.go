package obs

import (
	"context"
	"errors"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/store"
)

// Store wraps the run registry so that obs sees each ask's admission, every event appended and
// the end of each log. What it returns keeps s's contract, errors included; it is a
// store.Shared exactly when s is one, so the service treats it as it would treat s.
func (o *Observer) Store(s store.Store) store.Store {
	w := observedStore{Store: s, o: o}
	if sh, ok := s.(store.Shared); ok {
		return observedShared{observedStore: w, sh: sh}
	}
	return w
}

type observedStore struct {
	store.Store
	o *Observer
}

func (s observedStore) CreateTicket(ctx context.Context, nt store.NewTicket, limits store.Limits) ([]ask.Turn, error) {
	start := time.Now()
	turns, err := s.Store.CreateTicket(ctx, nt, limits)
	if err == nil {
		s.o.admitted(ctx, nt, start)
	}
	return turns, err
}

func (s observedStore) Append(ctx context.Context, ticket string, ev store.Event) error {
	err := s.Store.Append(ctx, ticket, ev)
	switch {
	case err == nil:
		s.o.appended(ticket, []store.Event{ev})
	case errors.Is(err, store.ErrFinished):
		s.o.endedElsewhere(ticket)
	}
	return err
}

func (s observedStore) Finish(ctx context.Context, ticket string, tail []store.Event, turn ask.Turn) error {
	s.o.markFinishing(ticket, true)
	err := s.Store.Finish(ctx, ticket, tail, turn)
	switch {
	case err == nil:
		s.o.finished(ticket, tail)
	case errors.Is(err, store.ErrFinished):
		s.o.markFinishing(ticket, false)
		s.o.endedElsewhere(ticket)
	case errors.Is(err, store.ErrUnavailable):
		// The service writes the end again until the store takes it (or its lease is gone).
		s.o.markFinishing(ticket, false)
	default:
		// The store refused the end for good: this instance will see no end.
		s.o.abandon(ticket, "store_error")
	}
	return err
}

// Generation passes store.Generational through: the service asks every store, and a store
// that is not generational answers errors.ErrUnsupported.
func (s observedStore) Generation(ctx context.Context) (string, error) {
	if g, ok := s.Store.(store.Generational); ok {
		return g.Generation(ctx)
	}
	return "", errors.ErrUnsupported
}

func (s observedStore) Read(ctx context.Context, ticket string, after int64) (store.Batch, error) {
	b, err := s.Store.Read(ctx, ticket, after)
	if err == nil && b.Finished {
		// A log this instance did not end is finished: another replica ended it. (A log this
		// instance is ending is marked finishing first, so its own end never reads as this.)
		s.o.endedElsewhere(ticket)
	}
	return b, err
}

// observedShared is observedStore over a store.Shared.
type observedShared struct {
	observedStore
	sh store.Shared
}

var _ store.Shared = observedShared{}

func (s observedShared) Lease() time.Duration { return s.sh.Lease() }

func (s observedShared) Renew(ctx context.Context, ticket string, u store.Usage) error {
	err := s.sh.Renew(ctx, ticket, u)
	if errors.Is(err, store.ErrFinished) {
		s.o.endedElsewhere(ticket)
	}
	return err
}

func (s observedShared) Lapsed(ctx context.Context, limit int) ([]string, error) {
	return s.sh.Lapsed(ctx, limit)
}

func (s observedShared) Usage(ctx context.Context, ticket string) (store.Usage, error) {
	return s.sh.Usage(ctx, ticket)
}

func (s observedShared) Restore(ctx context.Context, nt store.NewTicket, tail []store.Event, turn ask.Turn) error {
	s.o.markFinishing(nt.ID, true)
	err := s.sh.Restore(ctx, nt, tail, turn)
	if err == nil {
		s.o.finished(nt.ID, tail)
	} else {
		s.o.markFinishing(nt.ID, false)
	}
	return err
}

func (s observedShared) End(ctx context.Context, ticket string, tail []store.Event, turn ask.Turn, lapsedOnly bool) error {
	s.o.markFinishing(ticket, true)
	err := s.sh.End(ctx, ticket, tail, turn, lapsedOnly)
	if err == nil {
		s.o.finished(ticket, tail)
	} else {
		s.o.markFinishing(ticket, false)
	}
	return err
}
