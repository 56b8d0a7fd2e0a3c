package redis

import (
	"time"

	"github.com/das-ask/ask/store"
)

// HubStats reports how many tails s's hub holds and their bytes.
func HubStats(s *Store) (tails int, bytes int64) { return s.hub.stats() }

// PrefixOf is s's key prefix.
func PrefixOf(s *Store) string { return s.keys.prefix }

// LogKey is the key of ticket's log.
func LogKey(s *Store, ticket string) string { return s.keys.log(s.keys.bucketOf(ticket), ticket) }

// PendingEnds is how many runs' ends of ticket's bucket wait for an end call in flight.
func PendingEnds(s *Store, ticket string) int {
	s.ends.mu.Lock()
	defer s.ends.mu.Unlock()
	if q := s.ends.q[s.keys.bucketOf(ticket)]; q != nil {
		return len(q.waiting)
	}
	return 0
}

// MaxEndBatch is how many ends one end call carries at most.
const MaxEndBatch = maxEndBatch

// InflightEnds is how many end calls of ticket's bucket are in flight.
func InflightEnds(s *Store, ticket string) int {
	s.ends.mu.Lock()
	defer s.ends.mu.Unlock()
	if q := s.ends.q[s.keys.bucketOf(ticket)]; q != nil {
		return q.inflight
	}
	return 0
}

// NewClient is the client a URL names, as the store opens it (url.go).
var NewClient = newClient

// HubWatches is how many tickets' end watches s's hub holds.
func HubWatches(s *Store) int {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return len(s.hub.ends)
}

// RunsHeld is how many tickets' conversation and owner s keeps for their runs' ends.
func RunsHeld(s *Store) int {
	s.runs.mu.Lock()
	defer s.runs.mu.Unlock()
	return len(s.runs.m)
}

// SetClock makes now the clock s reads the outbox's times on, the caller's (time.Now).
func SetClock(s *Store, now func() time.Time) { s.now = now }

// ConvKey is the key of conversation id's hash.
func ConvKey(s *Store, id string) string { return s.keys.conv(s.keys.bucketOf(id), id) }

// OwnerTicketsKey is the key of o's tickets zset in ticket's bucket.
func OwnerTicketsKey(s *Store, ticket string, o store.Owner) string {
	return s.keys.ownerTickets(s.keys.bucketOf(ticket), o)
}
