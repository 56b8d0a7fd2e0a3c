package redis

import (
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// Change notifications: every script that changes a log publishes the ticket's id on the
// store's change channel; one subscription per store instance wakes the readers waiting in
// this process.

// waiters are the change channels of the tickets readers wait on in this process.
type waiters struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

// wait returns the channel closed at the ticket's next change.
func (w *waiters) wait(ticket string) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch, ok := w.m[ticket]
	if !ok {
		ch = make(chan struct{})
		w.m[ticket] = ch
	}
	return ch
}

// wake closes the ticket's channel: its readers read again.
func (w *waiters) wake(ticket string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.m[ticket]; ok {
		close(ch)
		delete(w.m, ticket)
	}
}

// wakeAll wakes every reader: after a reconnect, notifications may have been lost.
func (w *waiters) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, ch := range w.m {
		close(ch)
		delete(w.m, id)
	}
}

// listen wakes the readers of each ticket a notification names, and every reader after the
// subscription was re-established. It returns when the subscription is closed.
func (s *Store) listen(ch <-chan any) {
	defer close(s.listened)
	for m := range ch {
		switch m := m.(type) {
		case *goredis.Message:
			s.waiters.wake(m.Payload)
		case *goredis.Subscription:
			s.log.Warn("redis store: change notifications re-subscribed; waking every reader")
			s.waiters.wakeAll()
		}
	}
}
