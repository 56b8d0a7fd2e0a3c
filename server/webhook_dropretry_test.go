package server_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestLateCreatesWebhookRemovalIsRetried: an ask without a key whose create the store took
// after its request answered 503 "not started" is ended unrun; its webhook, which nobody is to
// hear of, must be gone before that end makes it due. The removal meets the same store that
// just stalled: when it fails, it is retried until the store answers, as the end is. Before,
// one failed removal was logged ('it expires unsent') and the end then made the delivery due,
// so the receiver heard of an ask its caller was told was not started.
func TestLateCreatesWebhookRemovalIsRetried(t *testing.T) {
	srv := redistest.Start(t)
	var fails atomic.Int64 // the first removals fail, as a store still away answers
	fails.Store(2)
	st := &pendingStore{Store: replicaStore(t, srv, "whdrop:"+rand.Text()+":", time.Minute), remove: func(context.Context) error {
		if fails.Add(-1) >= 0 {
			return fmt.Errorf("remove webhook: %w", store.ErrUnavailable)
		}
		return nil
	}}
	h, rcv, ends := webhookHarness(t, st, 300*time.Millisecond)
	cid := h.conv(alice)
	const q = "How many sev1 incidents did we have in 2026-Q2? (late, removal fails)"
	h.secret(q)
	r, err := h.cw.CreateAskWithResponse(t.Context(), cid, nil,
		gen.AskRequest{Question: q, Webhook: &gen.WebhookRequest{Url: rcv.URL() + "/hooks/late"}}, bearer(alice))
	if err != nil {
		t.Fatal(err)
	}
	problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)
	ticket := lateEnd(t, h, ends)
	if fails.Load() == 2 {
		t.Fatal("RemoveWebhook was never called: the test did not exercise its failure")
	}
	if w, err := st.Webhook(t.Context(), ticket); err == nil {
		t.Errorf("the late-made ticket ended with its webhook still in the outbox (%s): it is delivered to a receiver whose caller was told the ask was not started", w.State)
	}
}
