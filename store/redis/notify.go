package redis

import (
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// Change notifications: every script that changes a log publishes the ticket's id, the
// append script on the store's change channel (with the seq it appended), the end script on
// its end channel; one
// subscription per store instance hands them to the tail hub, which wakes the readers waiting
// in this process (and, for an end, the runner's lease watch).

// listen hands each notification of sub, and then of each subscription that replaces it
// (s.resub: after a Sentinel switch), to the hub. It returns when Close closed the last.
func (s *Store) listen(sub *goredis.PubSub) {
	defer close(s.listened)
	for {
		s.consume(sub.ChannelWithSubscriptions())
		next, ok := <-s.resub
		if !ok {
			return
		}
		sub = next
	}
}

// consume hands each notification to the hub, and drops every tail (waking every reader and
// watcher) after the subscription was re-established, recording the floors of the tails it
// drops (floor.go). It returns when the subscription is
// closed.
func (s *Store) consume(ch <-chan any) {
	ended := s.keys.ended()
	for m := range ch {
		switch m := m.(type) {
		case *goredis.Message:
			// An append's payload is "<ticket>\x00<seq>\x00<replica>" (its last seq, its
			// writer), an end's the ticket. This instance's own appends are in its tails
			// already (hub.wrote), or marked stale there if their outcome was unknown.
			id, rest, _ := strings.Cut(m.Payload, "\x00")
			seq, by, _ := strings.Cut(rest, "\x00")
			if by != "" && by == s.replica {
				continue
			}
			var n int64
			if seq != "" { // an end's payload has none
				n, _ = strconv.ParseInt(seq, 10, 64)
			}
			if m.Channel == ended {
				s.runs.heardEnd(id)
			}
			s.hub.changed(id, n, m.Channel == ended)
		case *goredis.Subscription:
			floors := s.hub.reset()
			if m.Kind == "subscribe" {
				// Redis may have come back without what the readers here were given.
				s.raiseFloors(floors)
			}
			if m.Kind == "subscribe" && m.Channel == ended {
				s.log.Warn("redis store: change notifications re-subscribed; waking every reader")
				s.kickPersistence() // a reconnect: perhaps to a Redis restarted otherwise
				s.reconnected()
			}
		}
	}
}

// Reconnects receives once the store's change notifications were subscribed again after their
// connection broke (a Redis restart among the causes; several at once may be one receive): the
// store may then have lost the writes its Redis had not yet put on disk (store.Shared's
// restore), of tickets that had ended too.
func (s *Store) Reconnects() <-chan struct{} { return s.reconnects }

// reconnected says so to Reconnects. The first subscription is confirmed before the
// notification goroutine reads (New), so every subscription it reads is a new one.
func (s *Store) reconnected() {
	select {
	case s.reconnects <- struct{}{}:
	default:
	}
}
