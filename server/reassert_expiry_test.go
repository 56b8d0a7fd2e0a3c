package server_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// kickedStore is a Redis store whose reconnections are the test's: each send on reconnected is
// one, heard by the server's reassertion loop, which takes the next only once its pass is done.
type kickedStore struct {
	*redisstore.Store
	reconnected chan struct{}
}

func (k kickedStore) Reconnects() <-chan struct{} { return k.reconnected }

func (kickedStore) RestartedWithin(context.Context, time.Duration) (bool, error) { return false, nil }

// TestReconnectAfterTTLLeavesExpiredAsksGone: an ask ended on a replica, its ticket and its
// Idempotency-Key's record expired DAS_ASK_TTL_S later, and then the replica's store
// reconnected (as it does when the replica wakes from a freeze that outlived the TTL, its
// commands timed out) within the ten seconds it keeps its ends for a Redis that lost them.
// Before, the replica took the expired ticket for one the store had lost and wrote it again:
// a ticket that read 404 past its TTL read as answered again for another TTL, and a retry with
// its key replayed it instead of creating a new ask (measured with askd: DAS_ASK_TTL_S=4, the
// replica SIGSTOPped for 7 s). Now what has expired by the store's own rule stays gone.
func TestReconnectAfterTTLLeavesExpiredAsksGone(t *testing.T) {
	srv := redistest.Start(t)
	const ttl = time.Second
	st := kickedStore{
		Store:       replicaStoreWith(t, srv, redisstore.Options{Prefix: "expired:" + rand.Text() + ":", Lease: time.Second, TTL: ttl}),
		reconnected: make(chan struct{}),
	}
	var runs atomic.Int64
	h := newHarness(t, server.Options{Store: st, Runner: countingRunner(&runs), TTL: ttl})

	cid := h.conv(alice)
	r := h.keyedAsk(alice, cid, "expired-key", "how many sev1 incidents did we have in 2026-Q2?")
	if r.StatusCode() != http.StatusAccepted {
		t.Fatalf("keyed ask: %d %s", r.StatusCode(), r.Body)
	}
	ticket := r.JSON202.Ticket
	checkLifecycle(t, h.events(alice, ticket), gen.EventTypeAnswer)
	redistest.Poll(t, "the ticket gone past its TTL", func() bool {
		return h.status(alice, ticket).StatusCode() == http.StatusNotFound
	})

	// The store reconnects; the second send is taken once the first one's pass is done.
	for range 2 {
		select {
		case st.reconnected <- struct{}{}:
		case <-time.After(10 * time.Second):
			t.Fatal("the server did not take the reconnection")
		}
	}

	if got := h.status(alice, ticket).StatusCode(); got != http.StatusNotFound {
		t.Errorf("ticket %s past its TTL reads %d after a reconnection, want 404", ticket, got)
	}
	if got := h.askRaw(alice, cid, "and in 2026-Q3?").StatusCode(); got != http.StatusNotFound {
		t.Errorf("an ask in the conversation past its TTL: %d, want 404", got)
	}
	cid = h.conv(alice)
	r = h.keyedAsk(alice, cid, "expired-key", "how many sev1 incidents did we have in 2026-Q2?")
	if r.StatusCode() != http.StatusAccepted || r.JSON202.Ticket == ticket {
		t.Errorf("the key reused past its TTL answered %d %s, want a new ticket", r.StatusCode(), r.Body)
	}
	if t.Failed() {
		t.Log(h.logs.String())
	}
}
