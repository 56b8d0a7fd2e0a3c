package server_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
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

// TestRemoteEndKeepsTSInOrder: a replica ending a run another replica admitted stamps the end
// on its own clock, and that clock may be behind the runner's. The end's events came before
// the run's last event and before the ticket's created_at (probed: the runner's replica 30 s
// ahead and SIGKILLed, the sweep of the other ended its run 25 s before its last step), where
// ts never decreases along seq and none is before created_at (conformance events.ts-ordered).
func TestRemoteEndKeepsTSInOrder(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "skew:" + rand.Text() + ":"
	ahead := replicaStore(t, srv, prefix, time.Minute) // the admitting replica, its clock a minute ahead
	b := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, time.Minute)})

	owner := store.Owner{Tenant: "tenant-1", OID: "alice"}
	cid, tid := "c_skew"+rand.Text(), "t_skew"+rand.Text()
	created := time.Now().Add(time.Minute).UTC().Round(0)
	if err := ahead.CreateConversation(t.Context(), store.Conversation{ID: cid, Owner: owner, CreatedAt: created}, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	ev := func(seq int64, typ gen.EventType, ts time.Time) store.Event {
		return store.Event{Seq: seq, Type: typ, Data: fmt.Appendf(nil, `{"seq":%d,"ticket":%q,"conversation_id":%q,"ts":%q,"type":%q}`,
			seq, tid, cid, ts.Format(time.RFC3339Nano), typ)}
	}
	if _, err := ahead.CreateTicket(t.Context(), store.NewTicket{ID: tid, ConversationID: cid, Owner: owner, CreatedAt: created,
		Accepted: ev(1, gen.EventTypeAccepted, created), Question: "q"}, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	lastStep := created.Add(2 * time.Second)
	if _, err := ahead.AppendBatch(t.Context(), tid, []store.Event{ev(2, gen.EventTypeStep, lastStep)}); err != nil {
		t.Fatal(err)
	}
	if r := b.cancel(alice, tid); r.StatusCode() != http.StatusAccepted {
		t.Fatalf("cancel on the other replica: %d %s", r.StatusCode(), r.Body)
	}
	var prev time.Time
	for _, f := range b.events(alice, tid) {
		var e struct {
			Seq       int64     `json:"seq"`
			Type      string    `json:"type"`
			TS        time.Time `json:"ts"`
			ElapsedMs int64     `json:"elapsed_ms"`
		}
		if err := json.Unmarshal(f.Data, &e); err != nil {
			t.Fatal(err)
		}
		if e.TS.Before(prev) || e.TS.Before(created) {
			t.Errorf("seq %d (%s): ts %s, before the ticket's created_at %s or seq %d's %s", e.Seq, e.Type, e.TS, created, e.Seq-1, prev)
		}
		if e.Type == string(gen.EventTypeDone) && e.ElapsedMs < lastStep.Sub(created).Milliseconds() {
			t.Errorf("done.elapsed_ms %d: less than the run's last step came after its creation (%d ms)", e.ElapsedMs, lastStep.Sub(created).Milliseconds())
		}
		prev = e.TS
	}
}
