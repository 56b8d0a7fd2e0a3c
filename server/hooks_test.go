package server_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
)

// hookLog records what the service's hooks report.
type hookLog struct {
	mu       sync.Mutex
	admitted []server.Admission
	running  []string
	types    []gen.EventType
	evicted  int
	ends     []server.End
}

func (l *hookLog) hooks() server.Hooks {
	return server.Hooks{
		Admitted: func(_ context.Context, a server.Admission) {
			l.mu.Lock()
			l.admitted = append(l.admitted, a)
			l.mu.Unlock()
		},
		Running: func(ctx context.Context, ticket string) context.Context {
			l.mu.Lock()
			l.running = append(l.running, ticket)
			l.mu.Unlock()
			return ctx
		},
		Appended: func(_ string, typ gen.EventType, body any, evicted int) {
			l.mu.Lock()
			defer l.mu.Unlock()
			if _, typed := body.(gen.StepBody); typ == gen.EventTypeStep && !typed {
				panic("a step reported without its typed body")
			}
			l.types = append(l.types, typ)
			l.evicted += evicted
		},
		Ended: func(_ string, e server.End) { l.mu.Lock(); l.ends = append(l.ends, e); l.mu.Unlock() },
	}
}

// TestHooksReportTheLifecycle: one admission, the run's events as appended, the steps the
// store's bound evicted (exactly as many as the store dropped), and one end with the typed done.
func TestHooksReportTheLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const steps, maxEvents = 20, 8
		var l hookLog
		mem := store.NewMemory(store.MemoryOptions{MaxEvents: maxEvents})
		h := newHarness(t, server.Options{Hooks: l.hooks(), Store: mem, MaxEvents: maxEvents, Runner: answerRunner(steps)})
		ticket := h.ask(alice, h.conv(alice), "hooked")
		if got := types(h.events(alice, ticket)); len(got) == 0 || got[len(got)-1] != "done" {
			t.Fatalf("events %v, want the log to end with done", got)
		}
		synctest.Wait()

		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.admitted) != 1 || l.admitted[0].Ticket != ticket || l.admitted[0].OID != "alice" || len(l.running) != 1 {
			t.Errorf("admitted %+v, running %v; want one each for %s", l.admitted, l.running, ticket)
		}
		// The runner's events and the supervisor's open: everything but accepted and the tail.
		b, err := mem.Read(t.Context(), ticket, 0)
		if err != nil {
			t.Fatal(err)
		}
		last := b.Events[len(b.Events)-1].Seq
		if got, want := len(l.types), int(last)-1-3; got != want {
			t.Errorf("%d events reported appended, want %d", got, want)
		}
		if len(l.ends) != 1 {
			t.Fatalf("ends %+v, want one", l.ends)
		}
		e := l.ends[0]
		if e.Outcome != gen.EventTypeAnswer || e.Done.Steps != steps || e.Done.Outcome != gen.DoneBodyOutcomeAnswer || e.Remote || e.Reason != "" {
			t.Errorf("end %+v", e)
		}
		if got, want := l.evicted+e.Evicted, int(last)-len(b.Events); got != want || want == 0 {
			t.Errorf("evicted %d reported, the store dropped %d", got, want)
		}
	})
}

// heldEnds is an in-memory store whose ends wait for release: an end the store has not yet
// taken.
type heldEnds struct {
	*store.Memory
	release chan struct{}
}

func (s heldEnds) FinishCounted(ctx context.Context, ticket string, tail []store.Event, turn ask.Turn) (int, error) {
	<-s.release
	return s.Memory.FinishCounted(ctx, ticket, tail, turn)
}

// TestActiveCountsAnAskUntilItsEndIsStored: Active holds an ask from its admission until the
// store has taken its end, not only until its runner returns (the benchmark waits on it so that a
// burst pays for its runs' ends).
func TestActiveCountsAnAskUntilItsEndIsStored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := heldEnds{Memory: store.NewMemory(store.MemoryOptions{}), release: make(chan struct{})}
		h := newHarness(t, server.Options{Store: st, Runner: answerRunner(2)})
		if n := h.srv.Active(); n != 0 {
			t.Fatalf("Active %d before any ask, want 0", n)
		}
		cid := h.conv(alice)
		h.ask(alice, cid, "held")
		synctest.Wait() // the runner has answered; its end waits for the store
		if n := h.srv.Active(); n != 1 {
			t.Errorf("Active %d while the end waits for the store, want 1", n)
		}
		close(st.release)
		synctest.Wait()
		if n := h.srv.Active(); n != 0 {
			t.Errorf("Active %d once the store took the end, want 0", n)
		}
	})
}

// TestEndCarriesElapsedAtFullPrecision: an end reports the time from admission to done as a
// Duration, not only as done's whole milliseconds, so that ask_ask_duration_seconds records
// an ask of 1.5 ms as 0.0015 s, and one under a millisecond as more than nothing (it recorded
// 0.001 and 0).
func TestEndCarriesElapsedAtFullPrecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const took = 1500 * time.Microsecond
		var l hookLog
		h := newHarness(t, server.Options{Hooks: l.hooks(), Runner: ask.RunnerFunc(func(ctx context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome {
			time.Sleep(took)
			return ask.Outcome{Answer: answer("42")}
		})})
		ticket := h.ask(alice, h.conv(alice), "timed")
		h.events(alice, ticket)
		synctest.Wait()
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.ends) != 1 {
			t.Fatalf("ends %+v, want one", l.ends)
		}
		if e := l.ends[0]; e.Elapsed != took || e.Done.ElapsedMs != 1 {
			t.Errorf("end's Elapsed %v and done's elapsed_ms %d, want %v and 1", e.Elapsed, e.Done.ElapsedMs, took)
		}
	})
}
