package server_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/seal"
)

// TestLapsedAskWhoseQuestionWasShreddedEnds: replica A seals with key k1 and dies (stops
// renewing) while an ask runs; replica B runs with k1 dropped from its keys (crypto-shredding,
// docs/scale-out.md), so the ticket's question no longer opens. B's sweep must still end the
// run, leaving no turn (a shredded turn is left out), so that the conversation takes the next
// ask. Found by a review of the lapse sweep: it read the question for the turn, took the
// store's ErrNotFound for "another replica got there first", and ended nothing, at every
// sweep: the ticket held its owner's in-flight slot for good and every later ask in its
// conversation was a 409 naming a ticket that reads 404.
func TestLapsedAskWhoseQuestionWasShreddedEnds(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "shred:" + rand.Text() + ":"
	lease := 300 * time.Millisecond
	k1, err := seal.ParseKeys(seal.NewKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	k2, err := seal.ParseKeys(seal.NewKey("k2"))
	if err != nil {
		t.Fatal(err)
	}
	started, stopped, stored := make(chan string, 1), make(chan string, 2), make(chan string, 1)
	turns := make(chan int, 1)
	a := newHarness(t, server.Options{Store: deadReplica{replicaStoreWith(t, srv, redisstore.Options{Prefix: prefix, Lease: lease, Seal: k1})},
		Runner: blockingRunner(started, stopped), Hooks: stepStored(stored)})
	b := newHarness(t, server.Options{Store: replicaStoreWith(t, srv, redisstore.Options{Prefix: prefix, Lease: lease, Seal: k2}),
		Runner: historyRunner(turns)})

	cid := a.conv(alice)
	a.ask(alice, cid, "Take your time: how many sev1 incidents did we have in 2026-Q2?")
	within(t, started, "the run on A")
	within(t, stored, "A's step stored")
	deadline := time.Now().Add(20 * lease)
	for {
		r := b.askRaw(alice, cid, "How many sev1 incidents did we have in 2026-Q3?")
		if r.StatusCode() == http.StatusAccepted {
			break
		}
		if r.StatusCode() != http.StatusConflict || time.Now().After(deadline) {
			t.Fatalf("the next ask in the conversation, %v after A's lease could lapse: %d %s, want 202 once B's sweep ended the run",
				20*lease, r.StatusCode(), r.Body)
		}
		time.Sleep(lease / 4)
	}
	select {
	case got := <-turns:
		if got != 0 {
			t.Errorf("the next ask was given %d prior turns, want 0: the shredded ask leaves none", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next ask did not run on B within 10s")
	}
	within(t, stopped, "A's runner stopping once the run was ended elsewhere")
}

// deadReplica is a replica that neither renews its leases nor sweeps anyone's: as far as the
// others can tell, it died with its runs.
type deadReplica struct{ *redisstore.Store }

func (deadReplica) Renew(context.Context, string, store.Usage) error { return nil }
func (deadReplica) Lapsed(context.Context, int) ([]string, error)    { return nil, nil }
