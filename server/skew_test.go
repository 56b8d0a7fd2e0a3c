package server_test

import (
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/storetest"
)

// TestRemoteEndUnderClockSkew: a replica ending a run another replica admitted (a cancel that
// reached it) counts the run's elapsed time from the ticket's creation as the admitting
// replica's clock read it. With that clock ahead of its own (replicas' clocks differ; the
// store's times are Redis's for that reason), the difference was negative, and done carried
// elapsed_ms < 0, which the contract's minimum of 0 refuses.
func TestRemoteEndUnderClockSkew(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "skew:" + rand.Text() + ":"
	ahead := replicaStore(t, srv, prefix, time.Minute) // the admitting replica, its clock a minute ahead
	b := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, time.Minute)})

	owner := store.Owner{Tenant: "tenant-1", OID: "alice"}
	cid, tid := "c_skew"+rand.Text(), "t_skew"+rand.Text()
	created := time.Now().Add(time.Minute).UTC()
	if err := ahead.CreateConversation(t.Context(), store.Conversation{ID: cid, Owner: owner, CreatedAt: created}, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ahead.CreateTicket(t.Context(), store.NewTicket{ID: tid, ConversationID: cid, Owner: owner, CreatedAt: created,
		Accepted: storetest.Ev(1, gen.EventTypeAccepted), Question: "q"}, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if r := b.cancel(alice, tid); r.StatusCode() != http.StatusAccepted {
		t.Fatalf("cancel on the other replica: %d %s", r.StatusCode(), r.Body)
	}
	st := b.status(alice, tid)
	if st.StatusCode() != http.StatusOK || st.JSON200.Done == nil {
		t.Fatalf("status: %d %s", st.StatusCode(), st.Body)
	}
	if st.JSON200.State != gen.AskStateError || st.JSON200.Done.ElapsedMs < 0 {
		t.Errorf("the remote end: state %s, done.elapsed_ms %d; want error, >= 0", st.JSON200.State, st.JSON200.Done.ElapsedMs)
	}
}
