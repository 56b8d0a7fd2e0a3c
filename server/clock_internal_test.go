package server

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

type noAuth struct{}

func (noAuth) Authenticate(context.Context, string) (ask.Identity, error) { return ask.Identity{}, nil }

// TestRunTSIgnoreAWallClockStep: a run's events are stamped from its ticket's created_at on by
// the monotonic clock, so a step of the wall clock after the ticket was created moves none.
// Here the wall clock stands an hour before the created_at it stamped (it was stepped back an
// hour since, as NTP steps a clock or a VM resumes): the run's events, stamped by the wall
// clock, read an hour before created_at and before the events of lower seq (probed with askd
// and a clock stepped back an hour mid-run), where ts never decreases along seq (conformance
// events.ts-ordered).
func TestRunTSIgnoreAWallClockStep(t *testing.T) {
	mem := store.NewMemory(store.MemoryOptions{})
	t.Cleanup(func() { _ = mem.Close() })
	s, err := New(Options{Runner: ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome { return ask.Outcome{} }),
		Authenticator: noAuth{}, Store: mem, ShutdownGrace: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })

	created := time.Now().Add(time.Hour).UTC().Round(0) // the wall clock as it read at creation
	ev := func(seq int64, typ gen.EventType) store.Event {
		return store.Event{Seq: seq, Type: typ, Data: fmt.Appendf(nil, `{"seq":%d,"ticket":"t_1","conversation_id":"c_1","ts":%q,"type":%q}`,
			seq, created.Format(time.RFC3339Nano), typ)}
	}
	owner := store.Owner{Tenant: "t", OID: "o"}
	if err := mem.CreateConversation(t.Context(), store.Conversation{ID: "c_1", Owner: owner, CreatedAt: created}, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	nt := store.NewTicket{ID: "t_1", ConversationID: "c_1", Owner: owner, CreatedAt: created, Accepted: ev(1, gen.EventTypeAccepted),
		Then: []store.Event{ev(2, gen.EventTypeBranch)}, Question: "q"}
	if _, err := mem.CreateTicket(t.Context(), nt, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := s.admitCreate(t.Context(), nil, true); err != nil {
		t.Fatal(err)
	}
	r, _ := s.newRun(nt, nt.Then[0], time.Now(), nil)
	emitter{r}.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseGrounding, Subject: "incident", Source: "demo"})
	r.end(ask.Outcome{Error: &gen.ErrorBody{Kind: gen.ErrorKindCancelled, Message: "cancelled"}})

	b, err := mem.Read(t.Context(), "t_1", 0)
	if err != nil {
		t.Fatal(err)
	}
	prev := created
	for _, e := range b.Events {
		var env struct {
			TS time.Time `json:"ts"`
		}
		if err := json.Unmarshal(e.Data, &env); err != nil {
			t.Fatal(err)
		}
		if env.TS.Before(prev) {
			t.Errorf("seq %d (%s): ts %s, before created_at %s or the events of lower seq (%s)", e.Seq, e.Type, env.TS, created, prev)
		}
		prev = env.TS
	}
	if len(b.Events) < 5 {
		t.Errorf("%d events; want accepted, open, milestone and the end", len(b.Events))
	}
}
