package server

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/webhook"
)

// WebhookOptions configure webhook delivery (package webhook). With no allowed prefix in
// Config, an ask that names a webhook is a 400.
type WebhookOptions struct {
	Config webhook.Config
	// Outbox holds the deliveries; nil means the store's own when it is a store.Outbox (so
	// replicas sharing a store share deliveries), else an in-process one.
	Outbox store.Outbox
	// Observer is told of every attempt and end (package obs); nil means none.
	Observer webhook.Observer
	// Logger receives the deliverer's lines; nil means the service's own logger. The
	// composition root names the part ("component": "webhook"): a logger derived here from the
	// service's, which already names its own, would carry that key twice.
	Logger *slog.Logger
}

// startWebhooks builds the deliverer, when webhooks are enabled, and runs it until Shutdown.
func (s *Server) startWebhooks() error {
	wo := s.opts.Webhooks
	if !wo.Config.Enabled() {
		return wo.Config.Validate()
	}
	ob := wo.Outbox
	if ob == nil {
		if o, ok := s.store.(store.Outbox); ok {
			ob = o
		} else if _, shared := s.store.(store.Shared); shared {
			return errors.New("server: webhooks with a shared store need the store's outbox (Options.Webhooks.Outbox)")
		} else {
			ob = store.NewMemoryOutbox()
		}
	}
	log := wo.Logger
	if log == nil {
		log = s.log
	}
	d, err := webhook.New(webhook.Options{
		Config: wo.Config, Outbox: ob, Tickets: s.store, Observer: wo.Observer, Logger: log,
		TicketTTL: s.opts.TTL, // no attempt after the ticket is gone
	})
	if err != nil {
		return err
	}
	// Not s.base: Shutdown stops the deliverer only after the deliveries its last runs made due
	// were attempted (drainWebhooks).
	ctx, stop := context.WithCancel(context.WithoutCancel(s.base))
	s.outbox, s.hooks, s.stopHooks = ob, d, stop
	s.runners.Add(1)
	go func() {
		defer s.runners.Done()
		d.Run(ctx)
	}()
	return nil
}

// checkWebhook refuses, as a 400, a webhook the operator's settings do not admit.
func (s *Server) checkWebhook(w *gen.WebhookRequest) error {
	if w == nil {
		return nil
	}
	if err := s.opts.Webhooks.Config.CheckURL(w.Url); err != nil {
		var ue *webhook.URLError
		if errors.As(err, &ue) {
			return badRequest("the webhook is not allowed", "webhook.url: "+ue.Reason)
		}
		return badRequest("the webhook is not allowed")
	}
	return nil
}

// addWebhook registers ticket's delivery before the ticket exists; dropWebhook undoes it when
// the ticket is then refused, so a refused ask leaves nothing behind. The delivery is due, as
// a safety net, once the run's deadline, a lease and 10 s have passed; its run's end makes it due at
// once. It is forgotten when the ticket would be: TTL after that. It returns the delivery
// registered (nil when w names none), which the run keeps to register it again if the store
// loses it with the ticket (reWebhook).
func (s *Server) addWebhook(ctx context.Context, ticket string, w *gen.WebhookRequest, admitted time.Time) (*store.Webhook, error) {
	if w == nil || s.hooks == nil {
		return nil, nil
	}
	grace := 10 * time.Second
	if sh, ok := s.store.(store.Shared); ok {
		grace += sh.Lease()
	}
	due := admitted.Add(s.opts.Deadline + grace)
	hook := store.Webhook{Ticket: ticket, ID: webhook.NewID(), URL: w.Url, Due: due, Expires: due.Add(s.opts.TTL)}
	if err := s.outbox.AddWebhook(ctx, hook); err != nil {
		return nil, err
	}
	return &hook, nil
}

// reWebhook is a run's way to register its ticket's delivery again, under the same id, when
// the store lost the ticket and the run restores it (a Redis restarted empty, or one whose
// last second was lost: the outbox lives in the same Redis and went with it). Without it the
// restored ticket read as ended error{interrupted} while its webhook was gone: never sent,
// and not on GET. Nil when the ask named no webhook.
func (s *Server) reWebhook(hook *store.Webhook) func(context.Context) error {
	if hook == nil {
		return nil
	}
	return func(ctx context.Context) error {
		// The same delivery again changes nothing (a store that kept it); another id there
		// is one that store holds for this ticket, which stands.
		if err := s.outbox.AddWebhook(ctx, *hook); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
		return nil
	}
}

func (s *Server) dropWebhook(ticket string, w *gen.WebhookRequest) {
	if err := s.dropWebhookCtx(context.Background(), ticket, w); err != nil {
		s.log.Warn("webhook of a refused ask not removed; it expires unsent", "ticket", ticket, "err", err)
	}
}

// dropWebhookCtx removes ticket's delivery, if w named one; the caller logs a failure (or
// retries it: endLate).
func (s *Server) dropWebhookCtx(ctx context.Context, ticket string, w *gen.WebhookRequest) error {
	if w == nil || s.hooks == nil {
		return nil
	}
	return s.outbox.RemoveWebhook(ctx, ticket)
}

// drainWebhooks, at shutdown once no run is left, attempts the deliveries that are due (those of
// the runs that just ended among them) within ctx, then stops the deliverer.
func (s *Server) drainWebhooks(ctx context.Context) {
	if s.hooks == nil {
		return
	}
	s.hooks.Drain(ctx)
	s.stopHooks()
}

// webhookDue tells the deliverer that ticket's run has ended. It waits for the store at most
// StoreWait, as a request does: the run's admission slot is given back after it, and Shutdown
// waits for that. A delivery not marked due is brought round by the due time its
// registration set.
func (s *Server) webhookDue(ticket string) {
	if s.hooks != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.opts.StoreWait)
		defer cancel()
		s.hooks.Due(ctx, ticket)
	}
}

// webhookStatus is the ticket's delivery for GET, nil when it has none.
func (s *Server) webhookStatus(ctx context.Context, ticket string) (*gen.WebhookStatus, error) {
	if s.outbox == nil {
		return nil, nil
	}
	w, err := s.outbox.Webhook(ctx, ticket)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := &gen.WebhookStatus{Id: w.ID, State: w.State, Attempts: w.Attempts}
	if w.LastStatus != 0 {
		st.LastStatus = &w.LastStatus
	}
	if w.LastError != "" {
		st.LastError = &w.LastError
	}
	// Only a retry's time: before the first attempt Due is the safety net's (the run's deadline
	// and a lease), not when anything will be sent, and the run's end makes it due at once.
	if w.State == gen.WebhookStatePending && w.Attempts > 0 && !w.Due.IsZero() {
		due := w.Due.UTC()
		st.NextAttemptAt = &due
	}
	if !w.DeliveredAt.IsZero() {
		at := w.DeliveredAt.UTC()
		st.DeliveredAt = &at
	}
	return st, nil
}
