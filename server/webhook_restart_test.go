//go:build !fuzzsmoke

package server_test

import (
	"bytes"
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// TestRestartKeepsTheWebhook: Redis in the memory-only mode restarts (SIGKILL: every key is
// gone, the outbox's too) while an ask that named a webhook runs. The runner restores its
// ticket ended error{interrupted} + done (TestRestartLosesEverything), and its webhook must
// deliver that end, under the id it had before the restart. Before, the restore re-created the
// ticket only: GET read the ask ended with no webhook at all, and nothing was ever sent (found
// from outside, three askd replicas on a redis-server SIGKILLed and restarted under load: every
// ask running across the restart ended interrupted, none of their webhooks came).
func TestRestartKeepsTheWebhook(t *testing.T) {
	srv := redistest.Start(t)
	st := replicaStoreWith(t, srv, redisstore.Options{Prefix: "whwiped:" + rand.Text() + ":", Lease: 5 * time.Second})
	secret := webhooktest.Secret()
	rcv := newReceiver(t, secret)
	mid, resume := make(chan string, 1), make(chan struct{})
	h := newHarness(t, server.Options{Store: st, Runner: phasedRunner(2, 2, mid, resume),
		Webhooks: server.WebhookOptions{Config: hookConfig(rcv, secret)}})
	ticket, before := askHookedMidRun(t, h, rcv.URL()+"/hooks/restart", mid)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(resume)

	w := h.waitWebhook(alice, ticket)
	if w.State != gen.WebhookStateDelivered || w.Id != before.Id {
		t.Fatalf("the restored ask's webhook %+v, want delivered under %s, its id before the restart", w, before.Id)
	}
	got := rcv.Deliveries()
	if len(got) != 1 || !got[0].Verified || got[0].ID != before.Id ||
		!bytes.Contains(got[0].Body, []byte(`"kind":"interrupted"`)) || !bytes.Contains(got[0].Body, []byte(ticket)) {
		t.Fatalf("receiver got %d deliveries (%+v), want the restored ticket's error{interrupted} under %s", len(got), got, before.Id)
	}
}

// TestLateRestoreDeliversTheWebhook: as TestRestartKeepsTheWebhook, but the restore is refused
// past the lease (Redis came back persisting while the service does not seal, as in
// TestRestoreWaitsForARedisThatPersists) and made later, after the run was released: the
// delivery registered again with it is made due then, not left to its safety net (the run's
// deadline, two minutes here, and more).
func TestLateRestoreDeliversTheWebhook(t *testing.T) {
	srv := redistest.Start(t)
	lease := 500 * time.Millisecond
	st := &restoreWatch{
		Store: replicaStoreWith(t, srv, redisstore.Options{Prefix: "whlate:" + rand.Text() + ":", Lease: lease}),
		after: 3 * lease, late: make(chan struct{}, 1),
	}
	secret := webhooktest.Secret()
	rcv := newReceiver(t, secret)
	mid, resume := make(chan string, 1), make(chan struct{})
	ended := make(chan server.End, 4)
	h := newHarness(t, server.Options{Store: st, Runner: phasedRunner(2, 2, mid, resume), Deadline: 2 * time.Minute,
		Hooks:    server.Hooks{Ended: func(_ string, e server.End) { ended <- e }},
		Webhooks: server.WebhookOptions{Config: hookConfig(rcv, secret)}})
	ticket, before := askHookedMidRun(t, h, rcv.URL()+"/hooks/late", mid)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.RestartDurable(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(resume)
	select {
	case <-st.late:
	case <-time.After(30 * time.Second):
		t.Fatal("no restore refused three leases after the first")
	}
	if err := raw(t, srv).ConfigSet(t.Context(), "appendonly", "no").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ended:
		if !e.Restored {
			t.Fatalf("the run's end %+v, want it restored", e)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the ask was not restored within 30s of Redis running memory-only again")
	}
	w := h.waitWebhook(alice, ticket)
	if w.State != gen.WebhookStateDelivered || w.Id != before.Id {
		t.Fatalf("the restored ask's webhook %+v, want delivered under %s, its id before the restart", w, before.Id)
	}
	if got := rcv.Deliveries(); len(got) != 1 || !got[0].Verified || !bytes.Contains(got[0].Body, []byte(`"kind":"interrupted"`)) {
		t.Fatalf("receiver got %d deliveries (%+v), want the restored ticket's error{interrupted}", len(got), got)
	}
}

// askHookedMidRun asks with a webhook to url and returns, once the run has reached mid, its
// ticket and its webhook as GET reads it then.
func askHookedMidRun(t *testing.T, h *harness, url string, mid <-chan string) (string, gen.WebhookStatus) {
	t.Helper()
	r := h.askHook(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q2?", url)
	if r.StatusCode() != http.StatusAccepted || r.JSON202 == nil {
		t.Fatalf("createAsk: %d %s", r.StatusCode(), r.Body)
	}
	within(t, mid, "the run's first steps")
	before := h.status(alice, r.JSON202.Ticket).JSON200
	if before == nil || before.Webhook == nil {
		t.Fatalf("the running ask's webhook before the restart: %+v", before)
	}
	return r.JSON202.Ticket, *before.Webhook
}
