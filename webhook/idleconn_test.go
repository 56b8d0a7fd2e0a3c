package webhook_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/webhook"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// finishedTickets answers every ticket finished with an answer.
type finishedTickets struct{}

func (finishedTickets) Ticket(_ context.Context, id string) (store.Ticket, error) {
	return store.Ticket{ID: id, ConversationID: "c1", LastSeq: 5,
		Terminal: &store.Event{Seq: 4, Type: gen.EventTypeAnswer, Data: []byte(`{"seq":4,"type":"answer","text":"42"}`)},
		Done:     &store.Event{Seq: 5, Type: gen.EventTypeDone, Data: []byte(`{"seq":5,"type":"done","ts":"2026-01-01T00:00:00Z"}`)},
	}, nil
}

// recordedOutbox is an outbox that says when a delivery has been recorded delivered.
type recordedOutbox struct {
	*store.MemoryOutbox
	delivered chan struct{}
}

func (o recordedOutbox) RecordWebhook(ctx context.Context, holder string, w store.Webhook) error {
	err := o.MemoryOutbox.RecordWebhook(ctx, holder, w)
	if err == nil && w.State == gen.WebhookStateDelivered {
		close(o.delivered)
	}
	return err
}

// TestRunLeavesNoConnection: once Run has returned, the deliverer holds no connection to a
// receiver, and so no goroutine of its transport. A kept-alive connection to a receiver that
// stays up otherwise outlives the deliverer (and the server that stopped it) by the transport's
// idle timeout, 30 s, its two goroutines with it.
func TestRunLeavesNoConnection(t *testing.T) {
	before := goleak.IgnoreCurrent()
	secret := webhooktest.Secret()
	rcv, err := webhooktest.New(secret)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close() // after the check: the receiver stays up, as a real one does
	ob := recordedOutbox{store.NewMemoryOutbox(), make(chan struct{})}
	d, err := webhook.New(webhook.Options{
		Config: webhook.Config{
			Allow:      []string{rcv.URL() + "/hooks/"},
			Secrets:    []string{secret},
			AllowAddrs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
			Poll:       10 * time.Millisecond,
			Timeout:    2 * time.Second,
		},
		Outbox: ob, Tickets: finishedTickets{},
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := ob.AddWebhook(t.Context(), store.Webhook{Ticket: "t1", ID: "msg_1", URL: rcv.URL() + "/hooks/a", Due: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { defer close(ran); d.Run(ctx) }()
	select {
	case <-ob.delivered: // the attempt's response was read and recorded: the connection went back to the pool
	case <-time.After(10 * time.Second):
		w, err := ob.Webhook(t.Context(), "t1")
		t.Fatalf("not delivered in 10 s: %+v, %v", w, err)
	}
	cancel()
	<-ran
	// The receiver's own goroutines (its listener and its side of the connection) are not the
	// deliverer's.
	if err := goleak.Find(before,
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http/httptest.(*Server).goServe.func1"),
	); err != nil {
		t.Fatalf("the deliverer's connection outlived Run: %v", err)
	}
}
