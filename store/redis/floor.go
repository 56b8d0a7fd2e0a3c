package redis

import (
	"context"
	"errors"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/store"
)

// Floors (store.Ticket.Floor): a Redis that comes back without its last writes (a crash before
// its everysec fsync, a failover to a replica behind its primary) may hold a running ticket's
// log shorter than what readers were given. When the ticket's runner is alive, it restores the
// log after every seq it assigned (Restore). When the runner died with Redis, the lease sweep
// of another replica ends the run, and it knew only the store's last seq: it ended the run at
// seqs readers had read with other events (a client that had read up to a step at 6 resumed
// with Last-Event-ID: 6 and was given done at 7, and no terminal: the terminal was at 6). So
// what was given is recorded beside the log: after a reconnect each replica raises the floor of
// every running ticket its tail hub had read, to the last seq it read (raiseFloors), and the
// service raises it to the cursor of a reader resuming past the log's end (RaiseFloor); an end
// from elsewhere then comes after it, the lost events a gap.

// RaiseFloor implements store.Floored.
func (s *Store) RaiseFloor(ctx context.Context, ticket string, seq int64) error {
	res, err := raiseFloor.Run(ctx, s.rdb, []string{s.keys.ticket(s.keys.bucketOf(ticket), ticket)}, seq).Text()
	if err != nil {
		return wrap(err)
	}
	return statusErr(res)
}

var _ store.Floored = (*Store)(nil)

// floorsWithin bounds how long a replica goes on recording the floors its tail hub knew after
// a reconnect; floorRetry is how long it waits between attempts while Redis cannot take them.
const (
	floorsWithin = 10 * time.Second
	floorRetry   = 100 * time.Millisecond
)

// raiseFloors records floors (ticket -> the last seq this instance's tail hub read of it,
// before a reconnect dropped the tails) on a goroutine that Close waits for. The lease sweep
// holds for a lease after a reconnect (server's sweepHeld), which this takes a few round trips of.
func (s *Store) raiseFloors(floors map[string]int64) {
	if len(floors) == 0 {
		return
	}
	s.calls.Add(1)
	go func() {
		defer s.calls.Done()
		ctx, cancel := context.WithTimeout(context.Background(), floorsWithin)
		defer cancel()
		for id, seq := range floors {
			if !s.raiseFloorRetrying(ctx, id, seq) {
				return
			}
		}
	}()
}

// raiseFloorRetrying is RaiseFloor, tried again while Redis cannot take it; false means give
// up the rest too (the store closed, or ctx ended).
func (s *Store) raiseFloorRetrying(ctx context.Context, ticket string, seq int64) bool {
	for {
		err := s.RaiseFloor(ctx, ticket, seq)
		switch {
		case err == nil, errors.Is(err, store.ErrFinished), errors.Is(err, store.ErrNotFound):
			return true
		case errors.Is(err, goredis.ErrClosed):
			return false
		case errors.Is(err, store.ErrUnavailable) && sleepCtx(ctx, floorRetry):
			continue
		}
		s.log.Warn("redis store: a ticket's floor not recorded after a reconnect", "ticket", ticket, "err", err)
		return ctx.Err() == nil
	}
}

// sleepCtx waits d, or reports false when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
