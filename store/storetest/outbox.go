package storetest

import (
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// Outbox proves the store.Outbox contract against ob: registration and its conflict, one
// claimant among many, a lapsed claim taken again with the old holder fenced off, final states
// that nothing changes, due-now on the run's end, and removal.
func Outbox(t *testing.T, ob store.Outbox) {
	ctx := t.Context()
	now := time.Now()
	tk := "t_" + rand.Text()
	w := store.Webhook{Ticket: tk, ID: "msg_" + rand.Text(), URL: "https://h.example/x", Due: now.Add(time.Hour), Expires: now.Add(2 * time.Hour)}
	if err := ob.AddWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := ob.AddWebhook(ctx, w); err != nil {
		t.Fatalf("the same AddWebhook again (a retry) = %v, want ok", err)
	}
	other := w
	other.ID = "msg_" + rand.Text()
	if err := ob.AddWebhook(ctx, other); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("AddWebhook under another id = %v, want ErrConflict", err)
	}
	got, err := ob.Webhook(ctx, tk)
	if err != nil || got.ID != w.ID || got.URL != w.URL || got.State != gen.WebhookStatePending || got.Attempts != 0 {
		t.Fatalf("Webhook = %+v, %v", got, err)
	}
	claimed := func(holder string, hold time.Duration) bool {
		ws, err := ob.ClaimWebhooks(ctx, holder, hold, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range ws {
			if x.Ticket == tk {
				if x.ID != w.ID || x.URL != w.URL {
					t.Fatalf("claimed %+v", x)
				}
				return true
			}
		}
		return false
	}
	if claimed("a", time.Minute) {
		t.Fatal("a delivery not yet due was claimed")
	}
	if err := ob.WebhookDue(ctx, tk); err != nil {
		t.Fatal(err)
	}
	// Many concurrent claimants: exactly one gets it.
	var mu sync.Mutex
	var winners []string
	var wg sync.WaitGroup
	for _, h := range []string{"a", "b", "c", "d", "e", "f"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if claimed(h, 300*time.Millisecond) {
				mu.Lock()
				winners = append(winners, h)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("claimed by %v, want exactly one", winners)
	}
	first := winners[0]
	if claimed("z", time.Minute) {
		t.Fatal("a held delivery was claimed again")
	}
	// The hold lapses: another claims it, and the first holder is fenced off.
	deadline := time.Now().Add(5 * time.Second)
	for !claimed("second", time.Minute) {
		if time.Now().After(deadline) {
			t.Fatal("a lapsed claim was not claimable")
		}
		time.Sleep(50 * time.Millisecond) // the store's clock decides the lapse (Redis TIME)
	}
	stale := w
	stale.State, stale.Attempts, stale.LastStatus = gen.WebhookStateDelivered, 1, 204
	if err := ob.RecordWebhook(ctx, first, stale); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("RecordWebhook by the lapsed holder = %v, want ErrNotHeld", err)
	}
	retry := w
	retry.State, retry.Attempts, retry.LastStatus, retry.Due = gen.WebhookStatePending, 1, 503, time.Now().Add(time.Hour)
	retry.Expires = now.Add(3 * time.Hour) // later than the delivery's: changes nothing
	if err := ob.RecordWebhook(ctx, "second", retry); err != nil {
		t.Fatal(err)
	}
	if got, _ = ob.Webhook(ctx, tk); got.Expires.Sub(w.Expires).Abs() > time.Second {
		t.Fatalf("a record with a later expiry moved the delivery's from %v to %v", w.Expires, got.Expires)
	}
	if err := ob.RecordWebhook(ctx, "second", retry); err != nil {
		t.Fatalf("the same RecordWebhook again (a retry) = %v, want ok", err)
	}
	if got, _ = ob.Webhook(ctx, tk); got.Attempts != 1 || got.LastStatus != 503 || got.State != gen.WebhookStatePending {
		t.Fatalf("after a retry: %+v", got)
	}
	if claimed("third", time.Minute) {
		t.Fatal("a delivery waiting for its retry was claimed early")
	}
	// Without the claim, nothing is recorded.
	retry.Due = time.Now()
	if err := ob.RecordWebhook(ctx, "third", retry); !errors.Is(err, store.ErrNotHeld) {
		t.Fatalf("RecordWebhook without a claim = %v, want ErrNotHeld", err)
	}
	if err := ob.RemoveWebhook(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if _, err := ob.Webhook(ctx, tk); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Webhook after RemoveWebhook = %v, want ErrNotFound", err)
	}
	if err := ob.WebhookDue(ctx, tk); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("WebhookDue after RemoveWebhook = %v, want ErrNotFound", err)
	}

	// A record with a sooner expiry (its ticket's, once the run has ended) brings the
	// delivery's forward, and the delivery is forgotten then.
	tk2 := "t_" + rand.Text()
	w2 := store.Webhook{Ticket: tk2, ID: "msg_" + rand.Text(), URL: "https://h.example/x", Due: time.Now().Add(time.Hour), Expires: time.Now().Add(2 * time.Hour)}
	if err := ob.AddWebhook(ctx, w2); err != nil {
		t.Fatal(err)
	}
	if err := ob.WebhookDue(ctx, tk2); err != nil {
		t.Fatal(err)
	}
	tk, w = tk2, w2 // what claimed looks for
	if !claimed("h", time.Minute) {
		t.Fatal("a due delivery was not claimed")
	}
	rec := w2
	rec.State, rec.Attempts, rec.LastStatus, rec.DeliveredAt, rec.Due = gen.WebhookStateDelivered, 1, 204, time.Now(), time.Time{}
	rec.Expires = time.Now().Add(1500 * time.Millisecond)
	if err := ob.RecordWebhook(ctx, "h", rec); err != nil {
		t.Fatal(err)
	}
	if got, err := ob.Webhook(ctx, tk2); err != nil || got.Expires.Sub(rec.Expires).Abs() > time.Second || got.State != gen.WebhookStateDelivered {
		t.Fatalf("after a record with a sooner expiry: %+v, %v; want it expiring at %v", got, err, rec.Expires)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, err := ob.Webhook(ctx, tk2)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("the delivery past its brought-forward expiry: %v; want ErrNotFound", err)
		}
		time.Sleep(50 * time.Millisecond) // the store's clock decides the expiry (Redis TIME)
	}
}
