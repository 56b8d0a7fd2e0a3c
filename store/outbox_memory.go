package store

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/das-ask/ask/gen"
)

// MemoryOutbox is the in-process Outbox, for the in-process store: it dies with the process,
// as the tickets it belongs to do. It holds no goroutine; expired deliveries are dropped as
// claims pass over them. Its clock is time.Now.
type MemoryOutbox struct {
	mu sync.Mutex
	m  map[string]*memWebhook
}

type memWebhook struct {
	w      Webhook
	holder string
	held   time.Time // the claim lapses then
	// recorder recorded the last attempt: its retry of that record is ok.
	recorder string
}

// NewMemoryOutbox returns an empty outbox.
func NewMemoryOutbox() *MemoryOutbox { return &MemoryOutbox{m: map[string]*memWebhook{}} }

var _ Outbox = (*MemoryOutbox)(nil)

func (o *MemoryOutbox) AddWebhook(_ context.Context, w Webhook) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e, ok := o.m[w.Ticket]; ok && time.Now().Before(e.w.Expires) {
		if e.w.ID == w.ID {
			return nil // the same registration again: a retry
		}
		return ErrConflict
	}
	w.State, w.Attempts, w.LastStatus, w.LastError = gen.WebhookStatePending, 0, 0, ""
	o.m[w.Ticket] = &memWebhook{w: w}
	return nil
}

func (o *MemoryOutbox) RemoveWebhook(_ context.Context, ticket string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, ticket)
	return nil
}

func (o *MemoryOutbox) WebhookDue(_ context.Context, ticket string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.get(ticket)
	if !ok {
		return ErrNotFound
	}
	now := time.Now()
	if e.w.State == gen.WebhookStatePending && !now.Before(e.held) && now.Before(e.w.Due) {
		e.w.Due = now
	}
	return nil
}

func (o *MemoryOutbox) ClaimWebhooks(_ context.Context, holder string, hold time.Duration, limit int) ([]Webhook, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	var due []*memWebhook
	for id, e := range o.m {
		if !now.Before(e.w.Expires) {
			delete(o.m, id)
			continue
		}
		if e.w.State == gen.WebhookStatePending && !now.Before(e.w.Due) && !now.Before(e.held) {
			due = append(due, e)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].w.Due.Before(due[j].w.Due) })
	if limit > 0 && len(due) > limit {
		due = due[:limit]
	}
	out := make([]Webhook, 0, len(due))
	for _, e := range due {
		e.holder, e.held = holder, now.Add(hold)
		out = append(out, e.w)
	}
	return out, nil
}

func (o *MemoryOutbox) RecordWebhook(_ context.Context, holder string, w Webhook) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.get(w.Ticket)
	if !ok {
		return ErrNotFound
	}
	if e.holder != holder || e.w.State != gen.WebhookStatePending {
		if e.recorder == holder && e.w.State == w.State && e.w.Attempts == w.Attempts {
			return nil // the same record again: a retry
		}
		return ErrNotHeld
	}
	e.w.State, e.w.Attempts, e.w.LastStatus, e.w.LastError = w.State, w.Attempts, w.LastStatus, w.LastError
	e.w.Due, e.w.DeliveredAt = w.Due, w.DeliveredAt
	if !w.Expires.IsZero() && w.Expires.Before(e.w.Expires) {
		e.w.Expires = w.Expires // its ticket's expiry, now that it is known
	}
	e.holder, e.held, e.recorder = "", time.Time{}, holder
	return nil
}

func (o *MemoryOutbox) Webhook(_ context.Context, ticket string) (Webhook, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.get(ticket)
	if !ok {
		return Webhook{}, ErrNotFound
	}
	return e.w, nil
}

// get returns the ticket's unexpired delivery; o.mu is held.
func (o *MemoryOutbox) get(ticket string) (*memWebhook, bool) {
	e, ok := o.m[ticket]
	if ok && !time.Now().Before(e.w.Expires) {
		delete(o.m, ticket)
		return nil, false
	}
	return e, ok
}
