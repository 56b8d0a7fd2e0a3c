package redis

import (
	"context"
	"errors"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/store"
)

// Read implements store.Store from the tail hub (hub.go): the readers of one ticket in this
// process share one tail of the log, which reads the store (one transaction: the finished
// flag, XRANGE from the tail's last entry, entry ids being "<seq>-0") only after a change
// notification, once for all of them. Every append publishes the ticket on the change channel
// from inside its script, after the write, and the tail's change channel is the one of the
// state it answers from, so a change after the read always closes it: replay, then live, with
// neither a gap nor a duplicate.
func (s *Store) Read(ctx context.Context, ticket string, after int64) (store.Batch, error) {
	return s.hub.read(ctx, ticket, after)
}

// WatchFinished reports whether the ticket is finished and, when it is not, a channel closed
// once it may have finished since: when any replica ends its log (the end script notifies on
// its own channel) or notifications may have been lost. Appends do not close it, so a runner
// watching its own ticket for an end from elsewhere pays nothing per event: one HGET at the
// start and one per end notification. For a ticket this instance created, the watch was
// registered before the creation (CreateTicket), so until it fires the ticket is known
// unfinished and the start costs no read either. It fails with store.ErrNotFound when the
// ticket is gone.
func (s *Store) WatchFinished(ctx context.Context, ticket string) (bool, <-chan struct{}, error) {
	ch, done, unfinished := s.hub.endWait(ticket)
	if done {
		return true, nil, nil
	}
	if unfinished {
		return false, ch, nil
	}
	fin, err := s.finishedFlag(ctx, ticket)
	if err != nil || fin {
		s.unwatched(ticket, ch, fin, err)
		return fin, nil, err
	}
	return false, ch, nil
}

// unwatched lets go of what a watch made for a ticket its read found finished (fin) or gone
// (store.ErrNotFound): no end will come to close the hub's watch ch, which would otherwise stay
// for the process's life, one per ticket (a run's lease watches again after each end it did
// not write, and finds its ticket finished); and a ticket ended elsewhere gets no end of this
// instance's, which is where runs forgets it otherwise.
func (s *Store) unwatched(ticket string, ch chan struct{}, fin bool, err error) {
	if fin || errors.Is(err, store.ErrNotFound) {
		s.hub.forgetEnd(ticket, ch)
	}
	if fin {
		s.runs.drop(ticket)
	}
}

// finishedFlag reads the ticket's finished flag: store.ErrNotFound when the ticket is gone.
func (s *Store) finishedFlag(ctx context.Context, ticket string) (bool, error) {
	fin, err := s.rdb.HGet(ctx, s.keys.ticket(s.keys.bucketOf(ticket), ticket), "finished").Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return false, store.ErrNotFound
	case err != nil:
		return false, wrap(err)
	}
	return fin == "1", nil
}

// NotifyFinished is WatchFinished with a function in place of the channel, for a watcher that
// keeps no goroutine waiting (the runner's lease, server.hold): when it reports the ticket
// unfinished, f is called once, on the store's notification goroutine (so it must not block),
// when the channel WatchFinished would have returned closes. stop takes f off the watch; it
// reports false when f has been called or is about to be. When the answer is finished or an
// error, f is taken off at once (an end that came during the read may have called it).
func (s *Store) NotifyFinished(ctx context.Context, ticket string, f func()) (bool, func() bool, error) {
	c, ch, done, unfinished := s.hub.endNotify(ticket, f)
	if done {
		return true, nil, nil
	}
	stop := func() bool { return s.hub.unnotify(ticket, c) }
	if unfinished {
		return false, stop, nil
	}
	fin, err := s.finishedFlag(ctx, ticket)
	if errors.Is(err, store.ErrNotFound) && s.runs.endedBeforeLost(ticket) {
		fin, err = true, nil // it ended elsewhere, then the store lost it: not restored
	}
	if err != nil || fin {
		stop()
		s.unwatched(ticket, ch, fin, err)
		return fin, nil, err
	}
	return false, stop, nil
}
