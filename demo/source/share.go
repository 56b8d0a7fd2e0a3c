package source

import (
	"context"
	"sync"
)

// shares holds each identity to at most n queries running at once, so that one identity's slow
// queries cannot hold every read connection: with the pool's four, two stay free for the others
// (until 2026-12-06 four slow queries of bob's made alice's SELECT 1 wait out the time limit and
// fail "busy"). Safe for concurrent use.
type shares struct {
	n  int
	mu sync.Mutex
	// held is each identity's running queries, by identity.key; an identity with none has no entry.
	held map[string]*share
}

// share is one identity's: a slot taken per running query, and how many calls are using or
// waiting for one (the entry is dropped when none is).
type share struct {
	slots chan struct{}
	users int
}

// newShares allows each identity n queries at once; n <= 0 means no limit.
func newShares(n int) *shares { return &shares{n: n, held: map[string]*share{}} }

// acquire waits for one of who's slots until ctx is done, and returns the function that gives it
// back; ok is false when ctx ended first.
func (s *shares) acquire(ctx context.Context, who identity) (release func(), ok bool) {
	if s.n <= 0 {
		return func() {}, true
	}
	key := who.key()
	s.mu.Lock()
	sh := s.held[key]
	if sh == nil {
		sh = &share{slots: make(chan struct{}, s.n)}
		s.held[key] = sh
	}
	sh.users++
	s.mu.Unlock()
	done := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if sh.users--; sh.users == 0 {
			delete(s.held, key)
		}
	}
	select {
	case sh.slots <- struct{}{}:
		return func() { <-sh.slots; done() }, true
	case <-ctx.Done():
		done()
		return nil, false
	}
}
