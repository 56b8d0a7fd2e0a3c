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
	k1, k2 := sealKeys(t, seal.NewKey("k1")), sealKeys(t, seal.NewKey("k2"))
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
	redistest.Poll(t, "the next ask in the conversation admitted (202) once B's sweep ended the run", func() bool {
		r := b.askRaw(alice, cid, "How many sev1 incidents did we have in 2026-Q3?")
		if c := r.StatusCode(); c != http.StatusAccepted && c != http.StatusConflict {
			t.Fatalf("the next ask in the conversation: %d %s, want 409 until B's sweep ends the run, then 202", c, r.Body)
		}
		return r.StatusCode() == http.StatusAccepted
	})
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

// TestShreddedTicketReadsAsGone: a ticket whose question was sealed with a key since dropped
// (crypto-shredding) reads as gone, as docs/scale-out.md says: its status, its stream and its
// cancel answer 404. Its stream was a 200 holding no event that closed without done, which a
// client that follows the rules reconnects to for ever, and its status a 200. So does one whose
// key was replaced by another under the same id (an audit found it read as before the fix for
// a dropped key: the kid was known, so it was not taken for shredded). A replica that still
// holds the key among older ones (a rotation) reads it.
func TestShreddedTicketReadsAsGone(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "shredgone:" + rand.Text() + ":"
	k1 := seal.NewKey("k1")
	replica := func(s string) *harness {
		return newHarness(t, server.Options{Store: replicaStoreWith(t, srv, redisstore.Options{Prefix: prefix, Seal: sealKeys(t, s)}), Runner: answerRunner(1)})
	}
	a, rotated := replica(k1), replica(seal.NewKey("k2")+","+k1)
	ticket := a.ask(alice, a.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	if r := a.status(alice, ticket, header("Prefer", "wait=10")); r.StatusCode() != http.StatusOK || r.JSON200.Done == nil {
		t.Fatalf("the ask did not end: %d %s", r.StatusCode(), r.Body)
	}
	for name, h := range map[string]*harness{"with its key": a, "with its key second": rotated} {
		if fs := h.events(alice, ticket); len(fs) == 0 || fs[len(fs)-1].Event != "done" {
			t.Errorf("%s, the stream: %v, want it to end with done", name, fs)
		}
	}
	for name, shredded := range map[string]*harness{"without its key": replica(seal.NewKey("k3")), "with another key under its id": replica(seal.NewKey("k1"))} {
		if r := shredded.status(alice, ticket); r.StatusCode() != http.StatusNotFound {
			t.Errorf("status %s: %d %s, want 404", name, r.StatusCode(), r.Body)
		}
		resp := shredded.stream(context.Background(), alice, ticket, nil)
		if body := readBody(t, resp); resp.StatusCode != http.StatusNotFound {
			t.Errorf("stream %s: %d %q, want 404", name, resp.StatusCode, body)
		}
		if r := shredded.cancel(alice, ticket); r.StatusCode() != http.StatusNotFound {
			t.Errorf("cancel %s: %d %s, want 404", name, r.StatusCode(), r.Body)
		}
	}
}

// sealKeys parses DAS_ASK_SEAL_KEYS-style keys.
func sealKeys(t *testing.T, s string) *seal.Keys {
	t.Helper()
	k, err := seal.ParseKeys(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
