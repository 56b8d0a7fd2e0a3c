package server_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestSweepWhileAnotherSlotMigrates: on a real three-primary Redis Cluster, replica A dies
// (stops renewing) while it runs an ask, and meanwhile another bucket's slot is being migrated
// between primaries (marked IMPORTING on the target and MIGRATING on its owner, as redis-cli
// --cluster reshard does first), so that Redis answers TRYAGAIN to the sweep's script over that
// bucket. Replica B's sweep must still end A's run within its lease, as docs/scale-out.md says
// ("An ask is interrupted DAS_ASK_LEASE_S after its replica's last renewal at the latest"), and
// the conversation take the next ask. Found by an audit from outside: an askd replica SIGKILLed
// during another bucket's migration left its ask running until the migration ended (20 s past
// a 4 s lease), for one bucket's TRYAGAIN failed the whole sweep.
func TestSweepWhileAnotherSlotMigrates(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t, 3, 0)
	ctx := t.Context()
	prefix := "sweepmig:" + rand.Text() + ":"
	lease := 300 * time.Millisecond
	open := func() *redisstore.Store { return clusterStore(t, c, redisstore.Options{Prefix: prefix, Lease: lease}) }
	started, stopped, stored := make(chan string, 1), make(chan string, 2), make(chan string, 1)
	a := newHarness(t, server.Options{Store: deadReplica{open()}, Runner: blockingRunner(started, stopped), Hooks: stepStored(stored)})
	b := newHarness(t, server.Options{Store: open(), Runner: answerRunner(1)})

	cid := a.conv(alice)
	ticket := a.ask(alice, cid, "Take your time: how many sev1 incidents did we have in 2026-Q2?")
	within(t, started, "the run on A")
	within(t, stored, "A's step stored")

	// Another bucket's slot starts migrating: no key moved yet, so the sweep's script over it
	// is sent on with ASK and answered TRYAGAIN (its keys are not all on the importing node).
	bucket, err := strconv.Atoi(ticket[strings.LastIndex(ticket, "-b")+2:])
	if err != nil {
		t.Fatalf("ticket %s names no bucket: %v", ticket, err)
	}
	other := "{" + prefix + "b" + strconv.Itoa((bucket+1)%redisstore.DefaultClusterBuckets) + "}"
	slot, err := c.KeySlot(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.StartMigration(ctx, slot, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Abort(context.Background()) })

	redistest.Poll(t, "A's run ended by B's sweep while another slot migrates", func() bool {
		r := b.status(alice, ticket)
		if r.StatusCode() != http.StatusOK {
			t.Fatalf("status: %d %s", r.StatusCode(), r.Body)
		}
		return r.JSON200.Done != nil
	})
	if r := b.status(alice, ticket); r.JSON200.Terminal == nil || !strings.Contains(string(r.Body), `"kind":"interrupted"`) {
		t.Errorf("A's run ended: %s, want error{interrupted}", r.Body)
	}
	if r := b.askRaw(alice, cid, "How many sev1 incidents did we have in 2026-Q3?"); r.StatusCode() != http.StatusAccepted {
		t.Errorf("the next ask in the conversation: %d %s, want 202", r.StatusCode(), r.Body)
	}
	within(t, stopped, "A's runner stopping once the run was ended elsewhere")
}

// TestKeyedAskRefusedDuringAMigrationRetriesAtOnce: on a real Redis Cluster, a keyed createAsk
// whose creation script Redis refuses, unrun (TRYAGAIN: the conversation's slot is being
// migrated and its keys are split between the two primaries), answers 503, and its retry
// with the same key, once the migration is over, is processed at once (202). The store
// answers such a refusal as a plain error, not a PendingError: nothing was created. Before,
// the key's record was kept until its lock lapsed (10 s), and every retry meanwhile answered
// 409 "still in progress" for a request that had been answered 503 (an audit from outside:
// 409s for 10 s after each 503 of a live migration).
func TestKeyedAskRefusedDuringAMigrationRetriesAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t, 3, 0)
	ctx := t.Context()
	prefix := "idemmig:" + rand.Text() + ":"
	h := newHarness(t, server.Options{Store: clusterStore(t, c, redisstore.Options{Prefix: prefix}), Runner: answerRunner(1)})
	cid := h.conv(alice)

	bucket := cid[strings.LastIndex(cid, "-b")+2:]
	tag := "{" + prefix + "b" + bucket + "}"
	slot, err := c.KeySlot(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.StartMigration(ctx, slot, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The conversation's hash moves first: the creation's keys are split.
	if err := m.Move(ctx, tag+"c:"+cid); err != nil {
		t.Fatal(err)
	}

	key := "k-" + rand.Text()
	params := &gen.CreateAskParams{IdempotencyKey: &key}
	q := "How many sev1 incidents did we have in 2026-Q2?"
	h.secret(q)
	r, err := h.cw.CreateAskWithResponse(ctx, cid, params, gen.AskRequest{Question: q}, bearer(alice))
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode() != http.StatusServiceUnavailable {
		t.Fatalf("keyed ask while its keys are split: %d %s, want 503", r.StatusCode(), r.Body)
	}

	// The migration ends: the rest of the slot's keys move and every primary names the target.
	if err := m.Finish(ctx, 0); err != nil {
		t.Fatal(err)
	}

	r, err = h.cw.CreateAskWithResponse(ctx, cid, params, gen.AskRequest{Question: q}, bearer(alice))
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode() != http.StatusAccepted || r.JSON202 == nil {
		t.Fatalf("the retry with its key once the migration is over: %d %s, want 202 at once (the first attempt created nothing)", r.StatusCode(), r.Body)
	}
	if st := h.status(alice, r.JSON202.Ticket, header("Prefer", "wait=10")); st.StatusCode() != http.StatusOK || st.JSON200.Done == nil {
		t.Errorf("the retry's ask did not end: %d %s", st.StatusCode(), st.Body)
	}
}

// TestKeyedConversationRefusedDuringAMigrationRetriesAtOnce: as for an ask, a keyed
// createConversation whose script Redis refused unrun (TRYAGAIN: the owner's slot is being
// migrated, its keys split between two primaries) answers 503, and its retry with the key,
// once the migration is over, is processed at once (201), not 409 "still in progress" until
// the record's 10 s lock lapses.
func TestKeyedConversationRefusedDuringAMigrationRetriesAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t, 3, 0)
	ctx := t.Context()
	prefix := "idemconv:" + rand.Text() + ":"
	h := newHarness(t, server.Options{Store: clusterStore(t, c, redisstore.Options{Prefix: prefix}), Runner: answerRunner(1)})
	first := h.conv(alice) // names alice's bucket, and holds keys in it

	tag := "{" + prefix + "b" + first[strings.LastIndex(first, "-b")+2:] + "}"
	slot, err := c.KeySlot(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.StartMigration(ctx, slot, nil)
	if err != nil {
		t.Fatal(err)
	}

	key := "k-" + rand.Text()
	params := &gen.CreateConversationParams{IdempotencyKey: &key}
	r, err := h.cw.CreateConversationWithResponse(ctx, params, gen.CreateConversationRequest{}, bearer(alice))
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode() != http.StatusServiceUnavailable {
		t.Fatalf("keyed conversation while the owner's slot migrates: %d %s, want 503", r.StatusCode(), r.Body)
	}
	if err := m.Finish(ctx, 0); err != nil {
		t.Fatal(err)
	}
	r, err = h.cw.CreateConversationWithResponse(ctx, params, gen.CreateConversationRequest{}, bearer(alice))
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode() != http.StatusCreated || r.JSON201 == nil {
		t.Fatalf("the retry with its key once the migration is over: %d %s, want 201 at once (the first attempt created nothing)", r.StatusCode(), r.Body)
	}
	h.ask(alice, r.JSON201.Id, "How many sev1 incidents did we have in 2026-Q2?")
}
