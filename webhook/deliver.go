package webhook

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/logthrottle"
	"github.com/das-ask/ask/store"
)

// Observer is told about every attempt and every delivery's end, for metrics. Labels it may
// derive are bounded: an outcome class, a status class, a final state. Never a URL or a secret.
type Observer interface {
	// Attempted reports one POST: its outcome (delivered, retry, rejected), its HTTP status
	// (0 when none came) and how long it took. retry is the answer's class, a failure worth
	// retrying, on the delivery's last attempt too (Ended then reports it failed).
	Attempted(outcome string, status int, elapsed time.Duration)
	// Ended reports a delivery's final state, its attempts and the time from the run's done to
	// that end.
	Ended(state gen.WebhookState, attempts int, sinceDone time.Duration)
}

// Tickets is what a deliverer reads of the store: a ticket's terminal event and done.
type Tickets interface {
	Ticket(ctx context.Context, id string) (store.Ticket, error)
}

// Options configure New.
type Options struct {
	Config  Config
	Outbox  store.Outbox
	Tickets Tickets
	// Observer, when not nil, is told of every attempt and end.
	Observer Observer
	// Logger receives the deliverer's logs (never a URL's query, a secret or a body); nil
	// discards them.
	Logger *slog.Logger
	// Transport replaces the network, for tests; the policy's dial checks then do not apply.
	Transport http.RoundTripper
	// TicketTTL is how long a finished ticket lives (DAS_ASK_TTL_S): no attempt is scheduled
	// after its done plus TicketTTL, when the ticket is gone. Zero: only a delivery's Expires
	// bounds it.
	TicketTTL time.Duration
}

// Deliverer delivers due webhooks from an outbox until its Run returns. Several deliverers (one
// per replica) may share an outbox: each delivery is claimed by one at a time.
type Deliverer struct {
	cfg     Config
	outbox  store.Outbox
	tickets Tickets
	obs     Observer
	log     *slog.Logger
	send    *sender
	// claimLog bounds the lines of claims the store does not answer (logthrottle).
	claimLog logthrottle.Gate
	holder   string
	ttl      time.Duration // Options.TicketTTL
	wake     chan struct{}
	// turn is held by the round in progress (capacity 1): Drain waits for Run's to end.
	turn chan struct{}
	// retries are the due times of the retries this deliverer recorded, to wake at each.
	retries retryTimes
}

// New validates opts.Config and returns a Deliverer.
func New(opts Options) (*Deliverer, error) {
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	if opts.Outbox == nil || opts.Tickets == nil {
		return nil, errors.New("webhook: Options.Outbox and Options.Tickets are required")
	}
	cfg := opts.Config.withDefaults()
	s, err := newSender(cfg, opts.Transport)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	for _, p := range cfg.openPrefixes() {
		// A prefix is matched as written: https://h/ask admits https://h/asking/… too.
		log.Warn("webhook allow-list prefix does not end in a slash: it admits every path that starts with it, not only those under it; end it with / unless that is meant",
			"prefix", p)
	}
	return &Deliverer{
		cfg: cfg, outbox: opts.Outbox, tickets: opts.Tickets, obs: opts.Observer, log: log, send: s,
		holder: "d_" + rand.Text(), ttl: opts.TicketTTL, wake: make(chan struct{}, 1), turn: make(chan struct{}, 1),
	}, nil
}

// Config is the deliverer's configuration, defaults filled in.
func (d *Deliverer) Config() Config { return d.cfg }

// NewID returns a fresh delivery id (webhook-id) for a ticket's delivery.
func NewID() string { return "msg_" + rand.Text() }

// Due tells the deliverer that ticket's run has ended: its delivery is due now.
func (d *Deliverer) Due(ctx context.Context, ticket string) {
	if err := d.outbox.WebhookDue(ctx, ticket); err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			// The safety-net due time set at registration still brings it round.
			d.log.Warn("webhook not marked due", "ticket", ticket, "err", err)
		}
		return
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx is done: on every wake-up, at the time of every retry it recorded,
// and every Poll (another replica's retries, lapsed claims) it claims what is due and
// makes one attempt of each, up to claimBatch at once, claiming more as attempts end or
// deliveries come due (round). An attempt cut short by ctx
// records nothing: its claim lapses and a deliverer (this replica's successor or another) makes
// it again under the same webhook-id. Once Run returns the deliverer holds no connection: the
// kept-alive ones to receivers are closed, so that their goroutines do not outlive it by the
// transport's idle timeout.
func (d *Deliverer) Run(ctx context.Context) {
	d.log.Info("webhook deliverer started", "holder", d.holder, "allowed_prefixes", len(d.cfg.Allow), "signing_secrets", d.send.signingSecrets())
	defer d.send.closeIdle()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-t.C:
		}
		d.round(ctx)
		t.Reset(d.retries.wait(time.Now(), d.cfg.Poll))
	}
}

// Drain makes one attempt of every delivery that is due (and of any that comes due while those
// are in flight), after Run's round in progress (whose attempts it lets end), and returns once
// they are made or ctx is done. A replica that stops
// calls it after its last runs have ended, and only then ends Run's context, so the deliveries
// their ends made due are attempted before it goes: with the in-process store nobody else would
// make them. A delivery to be retried is left to its next due time (with a shared store, to
// another replica or this one's successor).
func (d *Deliverer) Drain(ctx context.Context) { d.round(ctx) }

// claimBatch bounds the attempts a round has in flight at once.
const claimBatch = 32

// round claims and attempts due deliveries until none is due and none is in flight. It keeps up
// to claimBatch attempts in flight and claims more as each ends or as a run's end makes one due
// (Due's wake-up) or as the clock brings them due (at the time of a retry this deliverer
// recorded; every Poll for another replica's retries and lapsed claims), so a receiver that hangs for its whole timeout holds one slot, not the
// deliveries that come due behind it (found by audits: every delivery waited for the slowest
// attempt of the batch claimed before it; later, a retry waited past its next_attempt_at for
// an attempt elsewhere that hung, as only a run's end woke the round).
func (d *Deliverer) round(ctx context.Context) {
	select {
	case d.turn <- struct{}{}:
		defer func() { <-d.turn }()
	case <-ctx.Done():
		return
	}
	hold := 2 * d.cfg.Timeout // an attempt ends within Timeout; then the claim lapses
	ended := make(chan struct{}, claimBatch)
	poll := time.NewTimer(d.cfg.Poll)
	defer poll.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	inflight := 0
	for ctx.Err() == nil {
		if inflight < claimBatch {
			due, err := d.outbox.ClaimWebhooks(ctx, d.holder, hold, claimBatch-inflight)
			if err == nil {
				d.claimLog.OK(ctx, d.log, "webhooks claimed again")
			}
			if err != nil {
				if ctx.Err() == nil {
					// Bounded: rounds come at every poll for as long as the store is away.
					d.claimLog.Fail(ctx, d.log, "webhooks not claimed", "err", err)
				}
				if inflight == 0 {
					return
				}
				due = nil // claimed again when an attempt ends
			}
			for _, w := range due {
				inflight++
				wg.Go(func() {
					d.attempt(ctx, w)
					ended <- struct{}{}
				})
			}
			if len(due) > 0 {
				continue // more may be due: claim while slots are free
			}
		}
		if inflight == 0 {
			return
		}
		poll.Reset(d.retries.wait(time.Now(), d.cfg.Poll))
		select {
		case <-ended:
			inflight--
		case <-d.wake: // a run's end made one due
		case <-poll.C: // a retry's time came, or another replica's claim lapsed
		case <-ctx.Done():
		}
	}
}

// notFinishedRetry is how soon a delivery whose ticket has not ended is looked at again (its
// safety-net due time passed before the run's end was announced).
const notFinishedRetry = 5 * time.Second

// attempt makes one attempt of w, which this deliverer holds, and records it.
func (d *Deliverer) attempt(ctx context.Context, w store.Webhook) {
	// Checked again at every attempt, not only at createAsk: a delivery outlives the settings it
	// was admitted under (the outbox is shared by replicas, and survives restarts with Redis), so
	// a destination the operator has since dropped from the allow-list is never sent to.
	if err := d.cfg.CheckURL(w.URL); err != nil {
		w.State, w.LastError, w.Due = gen.WebhookStateFailed, "not_allowed", time.Time{}
		d.log.Warn("webhook destination no longer allowed: delivery failed unsent", "ticket", w.Ticket, "webhook_id", w.ID)
		d.record(ctx, w, time.Time{})
		return
	}
	t, err := d.tickets.Ticket(ctx, w.Ticket)
	now := time.Now()
	switch {
	case errors.Is(err, store.ErrNotFound):
		// The ticket is gone: so is its delivery, which is kept no longer.
		w.State, w.LastError = gen.WebhookStateFailed, "ticket_expired"
		d.recordUntil(ctx, w, time.Time{}, now)
		return
	case err != nil:
		if ctx.Err() == nil {
			d.log.Warn("webhook ticket not read", "ticket", w.Ticket, "err", err)
		}
		return // the claim lapses; the next claim tries again
	case !t.Finished():
		w.Due = now.Add(notFinishedRetry)
		d.record(ctx, w, time.Time{})
		return
	}
	body, doneAt, err := d.body(t)
	if err != nil {
		w.State, w.LastError = gen.WebhookStateFailed, "body_too_large"
		d.log.Error("webhook body not built", "ticket", w.Ticket, "err", err)
		d.record(ctx, w, doneAt)
		return
	}
	res := d.send.send(ctx, w.URL, w.ID, body)
	if ctx.Err() != nil {
		return // shutting down: record nothing, the claim lapses and the attempt is made again
	}
	out := classify(res)
	if d.obs != nil {
		d.obs.Attempted(out, res.Status, res.Elapsed)
	}
	now = time.Now()
	w.Attempts++
	w.LastStatus, w.LastError = res.Status, res.Err
	switch out {
	case outDelivered:
		w.State, w.DeliveredAt, w.Due = gen.WebhookStateDelivered, now, time.Time{}
	case outRejected:
		w.State, w.Due = gen.WebhookStateFailed, time.Time{}
		if res.Status >= 300 && res.Status < 400 {
			w.LastError = "redirect"
		}
	default:
		next := now.Add(backoff(d.cfg, w.Attempts, res.RetryAfter))
		if w.Attempts >= d.cfg.MaxAttempts || !next.Before(d.expires(w, doneAt)) {
			w.State, w.Due = gen.WebhookStateFailed, time.Time{}
		} else {
			w.Due = next
		}
	}
	d.log.Info("webhook attempt", "ticket", w.Ticket, "webhook_id", w.ID, "attempt", w.Attempts,
		"status", res.Status, "error", res.Err, "state", string(w.State), "elapsed_ms", res.Elapsed.Milliseconds())
	d.record(ctx, w, doneAt)
}

// expires is when w's ticket is gone: TicketTTL after its done, or w.Expires if that is sooner
// or the done's time is unknown. w.Expires alone comes later (it is set at admission, a run's
// deadline and a margin ahead of any done), so an attempt scheduled by it alone could come
// after the ticket expired: never made, the delivery ending ticket_expired instead.
func (d *Deliverer) expires(w store.Webhook, doneAt time.Time) time.Time {
	if d.ttl > 0 && !doneAt.IsZero() {
		if e := doneAt.Add(d.ttl); e.Before(w.Expires) {
			return e
		}
	}
	return w.Expires
}

// record stores w's new state; a final state is reported to the observer.
func (d *Deliverer) record(ctx context.Context, w store.Webhook, doneAt time.Time) {
	d.recordUntil(ctx, w, doneAt, time.Time{})
}

// recordUntil is record, the delivery kept no longer than until (zero: than its ticket).
func (d *Deliverer) recordUntil(ctx context.Context, w store.Webhook, doneAt, until time.Time) {
	if w.State == "" {
		w.State = gen.WebhookStatePending
	}
	// Kept no longer than its ticket: TTL after the run's end, once that is known. Sent only
	// when sooner than the delivery's own expiry: that one, read back from the store and sent
	// again, would move by the clocks' skew (and the milliseconds cut) at every record.
	if until.IsZero() {
		until = d.expires(w, doneAt)
	}
	if until.Before(w.Expires) {
		w.Expires = until
	} else {
		w.Expires = time.Time{}
	}
	err := d.outbox.RecordWebhook(ctx, d.holder, w)
	if errors.Is(err, store.ErrNotFound) && !w.Expires.IsZero() && !time.Now().Before(w.Expires) {
		// This very record, retried after a lost reply, found the delivery it let expire at once
		// (its ticket gone): it was recorded.
		err = nil
	}
	if errors.Is(err, store.ErrNotHeld) {
		// Another deliverer claimed it after this claim lapsed: its attempt stands.
		d.log.Info("webhook attempt superseded", "ticket", w.Ticket, "webhook_id", w.ID)
		return
	}
	if err != nil {
		if ctx.Err() == nil {
			d.log.Warn("webhook attempt not recorded", "ticket", w.Ticket, "err", err)
		}
		return
	}
	if w.State == gen.WebhookStatePending && !w.Due.IsZero() {
		d.retries.add(w.Due)
	}
	if w.State != gen.WebhookStatePending && d.obs != nil {
		var since time.Duration
		if !doneAt.IsZero() {
			since = time.Since(doneAt)
		}
		d.obs.Ended(w.State, w.Attempts, since)
	}
}

// backoff is the wait before retry number n+1 after n attempts: exponential from BaseBackoff,
// capped at MaxBackoff, with equal jitter (half fixed, half random, so retries of many
// deliveries spread out but none comes at once); a receiver's Retry-After, capped at
// MaxBackoff, is waited at least.
func backoff(c Config, n int, retryAfter time.Duration) time.Duration {
	exp := c.BaseBackoff
	for i := 1; i < n && exp < c.MaxBackoff; i++ {
		exp *= 2
	}
	exp = min(exp, c.MaxBackoff)
	d := exp/2 + mrand.N(exp/2+1)
	if ra := min(retryAfter, c.MaxBackoff); ra > d {
		d = ra
	}
	return d
}

// body is the delivery's JSON: the terminal event and done exactly as the log holds them.
// When that is larger than MaxBodyBytes the answer's rows go (result), then, if it is still
// too large, its divergence's (divergence.result keeps its columns, its rows emptied and marked
// truncated, for the contract requires it): the same question without the catalog may have as
// many rows. Both stay readable on GET /v1/asks/{ticket}.
func (d *Deliverer) body(t store.Ticket) ([]byte, time.Time, error) {
	var done gen.DoneEvent
	_ = json.Unmarshal(t.Done.Data, &done)
	b, err := deliveryBody(t, t.Terminal.Data)
	if err != nil {
		return nil, done.Ts, err
	}
	if len(b) <= d.cfg.MaxBodyBytes {
		return b, done.Ts, nil
	}
	var term map[string]json.RawMessage
	if err := json.Unmarshal(t.Terminal.Data, &term); err != nil {
		return nil, done.Ts, err
	}
	for _, trim := range []func(map[string]json.RawMessage) (bool, error){withoutResult, withoutDivergenceRows} {
		trimmed, err := trim(term)
		if err != nil {
			return nil, done.Ts, err
		}
		if !trimmed {
			continue
		}
		raw, err := json.Marshal(term)
		if err != nil {
			return nil, done.Ts, err
		}
		if b, err = deliveryBody(t, raw); err != nil {
			return nil, done.Ts, err
		}
		if len(b) <= d.cfg.MaxBodyBytes {
			return b, done.Ts, nil
		}
	}
	return nil, done.Ts, errors.New("delivery body larger than MaxBodyBytes without the result rows")
}

// withoutResult removes the terminal event's rows (result, which AnswerBody may go without).
func withoutResult(term map[string]json.RawMessage) (bool, error) {
	if _, ok := term["result"]; !ok {
		return false, nil
	}
	delete(term, "result")
	return true, nil
}

// withoutDivergenceRows empties the rows of the terminal event's divergence.result (which
// Divergence requires) and marks them truncated.
func withoutDivergenceRows(term map[string]json.RawMessage) (bool, error) {
	raw, ok := term["divergence"]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	var div map[string]json.RawMessage
	if err := json.Unmarshal(raw, &div); err != nil {
		return false, err
	}
	var rs map[string]json.RawMessage
	if r, ok := div["result"]; !ok || json.Unmarshal(r, &rs) != nil || rs == nil {
		return false, nil
	}
	rs["rows"], rs["truncated"] = json.RawMessage("[]"), json.RawMessage("true")
	var err error
	if div["result"], err = json.Marshal(rs); err != nil {
		return false, err
	}
	term["divergence"], err = json.Marshal(div)
	return err == nil, err
}

// deliveryBody splices the log's bytes in unchanged, so the delivery holds the same JSON the
// stream carried.
func deliveryBody(t store.Ticket, terminal []byte) ([]byte, error) {
	head, err := json.Marshal(struct {
		Type           gen.WebhookDeliveryType `json:"type"`
		Ticket         string                  `json:"ticket"`
		ConversationID string                  `json:"conversation_id"`
	}{gen.WebhookDeliveryTypeAskEnded, t.ID, t.ConversationID})
	if err != nil {
		return nil, err
	}
	if !json.Valid(terminal) || !json.Valid(t.Done.Data) {
		return nil, errors.New("stored event is not JSON")
	}
	b := make([]byte, 0, len(head)+len(terminal)+len(t.Done.Data)+24)
	b = append(b, head[:len(head)-1]...)
	b = append(b, `,"terminal":`...)
	b = append(b, terminal...)
	b = append(b, `,"done":`...)
	b = append(b, t.Done.Data...)
	return append(b, '}'), nil
}
