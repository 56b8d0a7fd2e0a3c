package store

import (
	"context"
	"errors"
	"time"

	"github.com/das-ask/ask/gen"
)

// Outbox holds the webhook deliveries of tickets whose ask named a webhook: one delivery per
// ticket, with one delivery id for all its attempts. It is where the delivery lives, not the
// replica that ran the ask, so a replica's death loses nothing: any replica's deliverer claims
// what is due, and a claim that is not recorded before it lapses is claimed again (the receiver
// then sees the same webhook-id twice, as a retry).
//
// The contract:
//
//   - AddWebhook registers a delivery in state pending, due at its Due time (a safety net: the
//     run's end normally makes it due at once, through WebhookDue). It fails with ErrConflict
//     when the ticket already has one under another ID; the same delivery again (a retry after
//     a lost reply) is ok and changes nothing.
//   - ClaimWebhooks returns pending deliveries whose next attempt is due and that nobody holds
//     (or whose holder's claim lapsed), and holds each for the caller until now+hold. Of any
//     number of concurrent claims of one delivery, exactly one gets it.
//   - RecordWebhook stores the outcome of an attempt by the delivery's current holder, and ends
//     its claim, even after the claim lapsed if nobody claimed it since; the same record by
//     the same holder again (a retry after a lost reply) is ok and changes nothing; any other
//     caller is refused with ErrNotHeld, changing nothing. A delivery that is delivered or
//     failed is final: nothing changes it again. A record whose Expires is set and sooner than
//     the delivery's makes it the delivery's: once the run has ended, the deliverer knows when
//     the ticket expires (TTL after its end), and the delivery is kept no longer (a later
//     Expires changes nothing).
//   - Deliveries are forgotten when their Expires passes (the ticket's own expiry, or later
//     until a record brings it forward).
//
// All methods are safe for concurrent use. The outbox holds a URL, never a question or a token.
type Outbox interface {
	AddWebhook(ctx context.Context, w Webhook) error
	// RemoveWebhook forgets the ticket's delivery (the ticket was never created after all).
	RemoveWebhook(ctx context.Context, ticket string) error
	// WebhookDue makes a pending delivery due at once (its run has ended), unless it is held.
	// ErrNotFound when the ticket has none.
	WebhookDue(ctx context.Context, ticket string) error
	ClaimWebhooks(ctx context.Context, holder string, hold time.Duration, limit int) ([]Webhook, error)
	RecordWebhook(ctx context.Context, holder string, w Webhook) error
	// Webhook returns the ticket's delivery; ErrNotFound when it has none.
	Webhook(ctx context.Context, ticket string) (Webhook, error)
}

// ErrNotHeld is RecordWebhook's answer to a caller that does not hold the delivery's claim (it
// lapsed, and another replica claimed it).
var ErrNotHeld = errors.New("store: the webhook delivery is not held by this caller")

// Webhook is one ticket's delivery and how it is going.
type Webhook struct {
	Ticket string
	// ID is the delivery's webhook-id: the same on every attempt.
	ID  string
	URL string
	// State is pending, delivered or failed.
	State    gen.WebhookState
	Attempts int
	// LastStatus is the last attempt's HTTP status (0: none); LastError why it got none.
	LastStatus int
	LastError  string
	// Due is when the next attempt is due, while pending.
	Due         time.Time
	DeliveredAt time.Time
	// Expires is when the outbox forgets the delivery.
	Expires time.Time
}
