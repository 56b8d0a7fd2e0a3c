package obs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/obs"
	"github.com/das-ask/ask/store"
)

func ev(seq int64, typ gen.EventType, data string) store.Event {
	if data == "" {
		data = fmt.Sprintf(`{"seq":%d,"type":%q}`, seq, typ)
	}
	return store.Event{Seq: seq, Type: typ, Data: []byte(data)}
}

func newTicket(id string) store.NewTicket {
	return store.NewTicket{
		ID: id, ConversationID: "c1", Owner: store.Owner{Tenant: "iss", OID: "alice"}, CreatedAt: time.Now(),
		Accepted: ev(1, gen.EventTypeAccepted, ""),
	}
}

// TestStoreCountsEvictedSteps: the steps obs counts as dropped are exactly those the store
// evicted from a full log.
func TestStoreCountsEvictedSteps(t *testing.T) {
	const maxEvents = 8
	o := obs.New(obs.Options{MaxEvents: maxEvents})
	mem := store.NewMemory(store.MemoryOptions{MaxEvents: maxEvents})
	st := o.Store(mem)
	ctx := t.Context()
	if err := st.CreateConversation(ctx, store.Conversation{ID: "c1", Owner: store.Owner{Tenant: "iss", OID: "alice"}}, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateTicket(ctx, newTicket("t1"), store.Limits{}); err != nil {
		t.Fatal(err)
	}
	seq := int64(1)
	for range 20 {
		seq++
		if err := st.Append(ctx, "t1", ev(seq, gen.EventTypeStep, "")); err != nil {
			t.Fatal(err)
		}
	}
	tail := []store.Event{
		ev(seq+1, gen.EventTypeBranch, ""),
		ev(seq+2, gen.EventTypeAnswer, ""),
		ev(seq+3, gen.EventTypeDone, `{"type":"done","outcome":"answer","steps":20,"elapsed_ms":1500}`),
	}
	if err := st.Finish(ctx, "t1", tail, ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer}); err != nil {
		t.Fatal(err)
	}
	b, err := mem.Read(ctx, "t1", 0)
	if err != nil {
		t.Fatal(err)
	}
	evicted := int(seq+3) - len(b.Events)
	fams := gather(t, o)
	if got := value(fams, "ask_step_events_dropped_total"); got != float64(evicted) || evicted == 0 {
		t.Errorf("dropped %v, store evicted %d", got, evicted)
	}
	if got := value(fams, "ask_events_emitted_total", "type", "step"); got != 20 {
		t.Errorf("steps emitted %v, want 20", got)
	}
	if got := value(fams, "ask_asks_total", "outcome", "answer", "kind", ""); got != 1 {
		t.Errorf("answers %v, want 1", got)
	}
	if got := value(fams, "ask_asks_running"); got != 0 {
		t.Errorf("running %v, want 0", got)
	}
}

// shared is a store.Shared over a Memory, enough to see that the wrapper keeps the seam.
type shared struct {
	*store.Memory
	ended []string
}

func (s *shared) Lease() time.Duration                               { return time.Second }
func (s *shared) Renew(context.Context, string, store.Usage) error   { return store.ErrFinished }
func (s *shared) Lapsed(context.Context, int) ([]string, error)      { return nil, nil }
func (s *shared) Usage(context.Context, string) (store.Usage, error) { return store.Usage{}, nil }
func (s *shared) Restore(context.Context, store.NewTicket, []store.Event, ask.Turn) error {
	return store.ErrFinished
}
func (s *shared) End(ctx context.Context, ticket string, tail []store.Event, turn ask.Turn, _ bool) error {
	s.ended = append(s.ended, ticket)
	return s.Finish(ctx, ticket, tail, turn)
}

// TestStoreKeepsTheSharedSeam: a wrapped shared store is still a store.Shared; an ask ended
// by End is counted once, and an ask this replica admitted but another ended (its renewal
// fails with ErrFinished) stops running here.
func TestStoreKeepsTheSharedSeam(t *testing.T) {
	if _, ok := obs.New(obs.Options{}).Store(store.NewMemory(store.MemoryOptions{})).(store.Shared); ok {
		t.Error("a wrapped Memory claims to be a store.Shared")
	}
	o := obs.New(obs.Options{})
	inner := &shared{Memory: store.NewMemory(store.MemoryOptions{})}
	st, ok := o.Store(inner).(store.Shared)
	if !ok {
		t.Fatal("a wrapped store.Shared is not one")
	}
	ctx := t.Context()
	st.CreateConversation(ctx, store.Conversation{ID: "c1", Owner: store.Owner{Tenant: "iss", OID: "alice"}}, store.Limits{})
	if _, err := st.CreateTicket(ctx, newTicket("t1"), store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if got := value(gather(t, o), "ask_asks_running"); got != 1 {
		t.Errorf("running %v, want 1", got)
	}
	tail := []store.Event{
		ev(2, gen.EventTypeBranch, ""),
		ev(3, gen.EventTypeError, `{"type":"error","kind":"interrupted","message":"m"}`),
		ev(4, gen.EventTypeDone, `{"type":"done","outcome":"error","elapsed_ms":10}`),
	}
	if err := st.End(ctx, "t1", tail, ask.Turn{}, true); err != nil {
		t.Fatal(err)
	}
	if err := st.Renew(ctx, "t1", store.Usage{}); !errors.Is(err, store.ErrFinished) {
		t.Fatalf("renew: %v", err)
	}
	fams := gather(t, o)
	if got := value(fams, "ask_asks_total", "outcome", "error", "kind", "interrupted"); got != 1 {
		t.Errorf("interrupted asks %v, want 1", got)
	}
	if got := value(fams, "ask_asks_running"); got != 0 {
		t.Errorf("running %v, want 0", got)
	}
	if len(inner.ended) != 1 {
		t.Errorf("End reached the inner store %d times", len(inner.ended))
	}

	// Admitted here, ended elsewhere: the renewal says so, and it is no longer running here.
	if _, err := st.CreateTicket(ctx, newTicket("t2"), store.Limits{}); err != nil {
		t.Fatal(err)
	}
	st.Renew(ctx, "t2", store.Usage{})
	if got := value(gather(t, o), "ask_asks_running"); got != 0 {
		t.Errorf("running %v after the log was ended elsewhere, want 0", got)
	}
}

// failingFinish is a store whose Finish fails (the engine went away).
type failingFinish struct{ *store.Memory }

func (failingFinish) Finish(context.Context, string, []store.Event, ask.Turn) error {
	return errors.New("connection reset")
}

// TestStoreForgetsAnAskWhoseFinishFailed: the service does not retry a failed Finish, so obs
// must not keep the ask running forever.
func TestStoreForgetsAnAskWhoseFinishFailed(t *testing.T) {
	o := obs.New(obs.Options{})
	st := o.Store(failingFinish{store.NewMemory(store.MemoryOptions{})})
	ctx := t.Context()
	st.CreateConversation(ctx, store.Conversation{ID: "c1", Owner: store.Owner{Tenant: "iss", OID: "alice"}}, store.Limits{})
	if _, err := st.CreateTicket(ctx, newTicket("t1"), store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := st.Finish(ctx, "t1", nil, ask.Turn{}); err == nil {
		t.Fatal("Finish did not fail")
	}
	fams := gather(t, o)
	if got := value(fams, "ask_asks_running"); got != 0 {
		t.Errorf("running %v, want 0", got)
	}
	if got := sum(fams, "ask_asks_total"); got != 0 {
		t.Errorf("asks counted %v, want none: no outcome was recorded", got)
	}
}
