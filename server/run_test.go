package server_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/memnet"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
)

// committedAsks wraps a handler and closes committed when a createAsk response's header is
// written: a runner that finds it open has started before its 202.
func committedAsks(next http.Handler, committed chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && len(r.URL.Path) > 5 && r.URL.Path[len(r.URL.Path)-5:] == "/asks" {
			w = &signalWriter{ResponseWriter: w, committed: committed}
		}
		next.ServeHTTP(w, r)
	})
}

type signalWriter struct {
	http.ResponseWriter
	committed chan struct{}
	done      bool
}

func (w *signalWriter) WriteHeader(code int) {
	if !w.done {
		w.done = true
		close(w.committed)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *signalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func TestTicketBeforeWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		committed := make(chan struct{})
		release := make(chan struct{})
		var calls atomic.Int64
		var runCtxErr atomic.Value
		runner := ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
			select {
			case <-committed:
			default:
				t.Error("the runner started before the 202 was written")
			}
			<-release
			calls.Add(1)
			emit.ModelCall(ask.Usage{InputTokens: 1})
			runCtxErr.Store(ctx.Err() == nil)
			return ask.Outcome{Answer: answer("done")}
		})
		h := newHarness(t, server.Options{Runner: runner})
		// Route the clients through the signalling wrapper.
		hc := &http.Client{Transport: memnet.Transport{Handler: committedAsks(h.srv.Handler(), committed)}}
		cw, err := gen.NewClientWithResponses("http://ask.test/ask", gen.WithHTTPClient(hc))
		if err != nil {
			t.Fatal(err)
		}
		cid := h.conv(alice)
		h.secret("how many sev1?")
		// The request's context ends as soon as the 202 is read: the run must not care.
		reqCtx, cancelReq := context.WithCancel(context.Background())
		r, err := cw.CreateAskWithResponse(reqCtx, cid, nil, gen.AskRequest{Question: "how many sev1?"}, bearer(alice))
		cancelReq()
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode() != http.StatusAccepted || r.JSON202 == nil {
			t.Fatalf("ask: %d %s", r.StatusCode(), r.Body)
		}
		tk := r.JSON202
		if tk.Ticket == "" || tk.EventsUrl != "/ask/v1/asks/"+tk.Ticket+"/events" || r.HTTPResponse.Header.Get("Location") != "/ask/v1/asks/"+tk.Ticket {
			t.Errorf("ticket %+v, Location %q", tk, r.HTTPResponse.Header.Get("Location"))
		}

		synctest.Wait() // the runner is now blocked on release, if it started at all
		if got := calls.Load(); got != 0 {
			t.Fatalf("model calls before release = %d", got)
		}
		st := h.status(alice, tk.Ticket)
		if st.JSON200 == nil || st.JSON200.State != gen.AskStateRunning || st.JSON200.LastSeq < 1 {
			t.Fatalf("status while blocked: %d %s", st.StatusCode(), st.Body)
		}
		// accepted is in the log already, with the question; nothing else carries it.
		resp := h.stream(context.Background(), alice, tk.Ticket, nil)
		br := newFrames(resp)
		first := br.next(t)
		if e := decode(t, first); e.Type != "accepted" || e.Seq != 1 || e.Q != "how many sev1?" {
			t.Fatalf("first event %s", first.Data)
		}
		close(release)
		frames := append([]frame{first}, readAll(t, br.br)...)
		_, done := checkLifecycle(t, frames, gen.EventTypeAnswer)
		if done.Model != 1 || done.In != 1 {
			t.Errorf("done = %+v, want one model call with one input token", done)
		}
		for _, f := range frames[1:] {
			if decode(t, f).Q != "" {
				t.Errorf("event %s carries the question", f.Event)
			}
		}
		if ok, _ := runCtxErr.Load().(bool); !ok {
			t.Error("the run's context ended with the request's")
		}
	})
}

// TestExactlyOneTerminal drives every way a run can end and checks the log's shape.
func TestExactlyOneTerminal(t *testing.T) {
	blockOnCtx := func(ctx context.Context, _ ask.Request, emit ask.Emitter) ask.Outcome {
		emit.Step(step(0))
		<-ctx.Done()
		// A tool call in flight completes after the end: the log must not show it.
		emit.Step(step(1))
		emit.ModelCall(ask.Usage{InputTokens: 100})
		return ask.Outcome{Answer: answer("too late")}
	}
	cases := []struct {
		name     string
		runner   ask.RunnerFunc
		end      func(h *harness, ticket string)
		opts     server.Options
		want     gen.EventType
		wantKind gen.ErrorKind
		steps    int64
	}{
		{name: "answer", runner: answerRunner(2).(ask.RunnerFunc), want: gen.EventTypeAnswer, steps: 2},
		{name: "abstention", runner: func(context.Context, ask.Request, ask.Emitter) ask.Outcome {
			return ask.Outcome{Abstention: &gen.AbstentionBody{Terms: []string{"churn"}}}
		}, want: gen.EventTypeAbstention},
		{name: "refusal", runner: func(_ context.Context, _ ask.Request, emit ask.Emitter) ask.Outcome {
			s := step(0)
			s.Refused = true
			emit.Step(s)
			return ask.Outcome{Refusal: &gen.RefusalBody{Tool: "run_query", Source: "demo", CallId: "call-0", Reason: "forbidden"}}
		}, want: gen.EventTypeRefusal, steps: 1},
		{name: "runner error", runner: func(context.Context, ask.Request, ask.Emitter) ask.Outcome {
			return ask.Outcome{Error: &gen.ErrorBody{Kind: gen.ErrorKindModel, Message: "model failed"}}
		}, want: gen.EventTypeError, wantKind: gen.ErrorKindModel},
		{name: "empty outcome", runner: func(context.Context, ask.Request, ask.Emitter) ask.Outcome {
			return ask.Outcome{}
		}, want: gen.EventTypeError, wantKind: gen.ErrorKindInternal},
		{name: "two outcomes", runner: func(context.Context, ask.Request, ask.Emitter) ask.Outcome {
			return ask.Outcome{Answer: answer("x"), Refusal: &gen.RefusalBody{}}
		}, want: gen.EventTypeError, wantKind: gen.ErrorKindInternal},
		{name: "panic", runner: func(_ context.Context, req ask.Request, _ ask.Emitter) ask.Outcome {
			panic("runner bug while handling " + req.Question)
		}, want: gen.EventTypeError, wantKind: gen.ErrorKindInternal},
		{name: "cancel", runner: blockOnCtx, end: func(h *harness, ticket string) {
			if r := h.cancel(alice, ticket); r.StatusCode() != http.StatusAccepted {
				h.t.Fatalf("cancel: %d %s", r.StatusCode(), r.Body)
			}
		}, want: gen.EventTypeError, wantKind: gen.ErrorKindCancelled, steps: 1},
		{name: "timeout", runner: blockOnCtx, opts: server.Options{Deadline: 30 * time.Second}, end: func(h *harness, _ string) {
			time.Sleep(31 * time.Second)
		}, want: gen.EventTypeError, wantKind: gen.ErrorKindTimeout, steps: 1},
		{name: "shutdown", runner: blockOnCtx, opts: server.Options{ShutdownGrace: 5 * time.Second}, end: func(h *harness, _ string) {
			if err := h.srv.Shutdown(context.Background()); err != nil {
				h.t.Errorf("Shutdown: %v", err)
			}
		}, want: gen.EventTypeError, wantKind: gen.ErrorKindShutdown, steps: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := tc.opts
				opts.Runner = tc.runner
				h := newHarness(t, opts)
				ticket := h.ask(alice, h.conv(alice), "question for "+tc.name)
				resp := h.stream(context.Background(), alice, ticket, nil)
				if tc.end != nil {
					synctest.Wait()
					tc.end(h, ticket)
				}
				frames := readAll(t, resp.Body)
				term, done := checkLifecycle(t, frames, tc.want)
				if tc.wantKind != "" && term.Kind != string(tc.wantKind) {
					t.Errorf("error kind %q, want %q", term.Kind, tc.wantKind)
				}
				if done.Steps != tc.steps {
					t.Errorf("done.steps = %d, want %d", done.Steps, tc.steps)
				}
				if done.In >= 100 {
					t.Errorf("a model call reported after the end was counted: %+v", done)
				}
				synctest.Wait() // the runner has returned; nothing more may land in the log
				st := h.status(alice, ticket)
				if st.JSON200 == nil || st.JSON200.LastSeq != int64(len(frames)) || st.JSON200.State != gen.AskState(tc.want) {
					t.Fatalf("status after the end: %s (log had %d events)", st.Body, len(frames))
				}
				if st.JSON200.Terminal == nil || st.JSON200.Done == nil || st.JSON200.Done.Outcome != gen.DoneEventOutcome(tc.want) {
					t.Errorf("status lacks terminal or done: %s", st.Body)
				}
			})
		})
	}
}

func TestCancelIdempotentAndAfterDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var afterCancel atomic.Int64
		h := newHarness(t, server.Options{Runner: ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
			if req.Question == "quick" {
				return ask.Outcome{Answer: answer("fast")}
			}
			for {
				if ctx.Err() != nil { // no model call once the context is done
					return ask.Outcome{}
				}
				emit.ModelCall(ask.Usage{OutputTokens: 1})
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
				if ctx.Err() != nil {
					afterCancel.Add(1)
				}
			}
		})})
		cid := h.conv(alice)
		ticket := h.ask(alice, cid, "slow")
		time.Sleep(2500 * time.Millisecond) // three model calls
		for i := range 3 {
			r := h.cancel(alice, ticket)
			if r.StatusCode() != http.StatusAccepted || r.JSON202 == nil || r.JSON202.State != gen.AskStateError {
				t.Fatalf("cancel #%d: %d %s", i, r.StatusCode(), r.Body)
			}
		}
		frames := h.events(alice, ticket)
		term, done := checkLifecycle(t, frames, gen.EventTypeError)
		if term.Kind != "cancelled" || done.Model != 3 {
			t.Errorf("terminal kind %q, model calls %d; want cancelled, 3", term.Kind, done.Model)
		}
		synctest.Wait()
		if afterCancel.Load() != 1 {
			t.Errorf("runner observed cancel %d times", afterCancel.Load())
		}

		// After done, cancel changes nothing.
		quick := h.ask(alice, cid, "quick")
		synctest.Wait()
		before := h.status(alice, quick).JSON200
		r := h.cancel(alice, quick)
		if r.StatusCode() != http.StatusAccepted || r.JSON202.State != gen.AskStateAnswer {
			t.Fatalf("cancel after done: %d %s", r.StatusCode(), r.Body)
		}
		after := h.status(alice, quick).JSON200
		if before.LastSeq != after.LastSeq || after.State != gen.AskStateAnswer {
			t.Errorf("cancel after done changed the ticket: %+v → %+v", before, after)
		}
	})
}

// TestRunContextDeadline: the run's context reports the ask's deadline (a runner plans its
// waits by it: agent/model's retries do), counted from the ticket's creation.
func TestRunContextDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type seen struct {
			at time.Time
			ok bool
		}
		got := make(chan seen, 1)
		h := newHarness(t, server.Options{Deadline: 42 * time.Second, Runner: ask.RunnerFunc(func(ctx context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome {
			dl, ok := ctx.Deadline()
			got <- seen{dl, ok}
			return ask.Outcome{Answer: answer("ok")}
		})})
		cid := h.conv(alice)
		start := time.Now() // the bubble's clock stands still until every goroutine waits
		h.ask(alice, cid, "when must you be done?")
		s := <-got
		if !s.ok || !s.at.Equal(start.Add(42*time.Second)) {
			t.Errorf("ctx.Deadline() = %v, %v; want %v, true", s.at, s.ok, start.Add(42*time.Second))
		}
	})
}

// TestUsageOfACutCall: done counts the model calls reported before the run ended (the
// contract's model_calls: a runner reports a call as it sends it) and the tokens reported by
// then: a call the deadline cuts off counts as a call, and its tokens, reported after done was
// written, do not.
func TestUsageOfACutCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{Deadline: 30 * time.Second, Runner: ask.RunnerFunc(func(ctx context.Context, _ ask.Request, emit ask.Emitter) ask.Outcome {
			emit.ModelCall(ask.Usage{})
			emit.Tokens(ask.Usage{InputTokens: 100, OutputTokens: 10}) // returned in time
			emit.ModelCall(ask.Usage{})                                // the next call, sent
			<-ctx.Done()                                               // and cut off
			emit.Tokens(ask.Usage{InputTokens: 1000, OutputTokens: 0})
			emit.ModelCall(ask.Usage{}) // too late to count
			return ask.Outcome{Answer: answer("too late")}
		})})
		ticket := h.ask(alice, h.conv(alice), "will it fit?")
		term, done := checkLifecycle(t, h.events(alice, ticket), gen.EventTypeError)
		if term.Kind != string(gen.ErrorKindTimeout) {
			t.Fatalf("error kind %q, want timeout", term.Kind)
		}
		if done.Model != 2 || done.In != 100 || done.Out != 10 {
			t.Errorf("done counts %d calls, %d in, %d out; want both calls sent and the tokens of the one that returned: 2, 100, 10", done.Model, done.In, done.Out)
		}
	})
}

// TestDeadlineAlreadyPast: an ask whose deadline has passed by the time its run is set up (a
// deadline shorter than the admission took) still gets its ticket and ends timeout, once.
// The timer fires at once, on another goroutine, at any point of the run's set-up; fifty asks
// give its interleavings a chance (a timer armed before the run knew its supervisor branch's
// open sealed a second open at seq 2, and the stream waited for a done the store refused).
func TestDeadlineAlreadyPast(t *testing.T) {
	h := newHarness(t, server.Options{Deadline: time.Nanosecond, Runner: ask.RunnerFunc(func(ctx context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome {
		<-ctx.Done()
		return ask.Outcome{Answer: answer("too late")}
	})})
	cid := h.conv(alice)
	for range 50 {
		ticket := h.ask(alice, cid, "is there time?")
		term, _ := checkLifecycle(t, h.events(alice, ticket), gen.EventTypeError)
		if term.Kind != string(gen.ErrorKindTimeout) {
			t.Fatalf("error kind %q, want timeout", term.Kind)
		}
	}
}

// refusingStore is the memory store refusing one batch of steps as out of order, as it would
// only if the service itself misnumbered its events.
type refusingStore struct {
	*store.Memory
	refuse atomic.Bool
}

func (s *refusingStore) AppendBatch(ctx context.Context, ticket string, evs []store.Event) (int, error) {
	for _, ev := range evs {
		if ev.Type == gen.EventTypeStep && s.refuse.CompareAndSwap(true, false) {
			return 0, store.ErrSeq
		}
	}
	return s.Memory.AppendBatch(ctx, ticket, evs)
}

// TestRefusedAppendEndsInterrupted: a run whose append the in-memory store refuses (a fault
// of the service's own: nothing else misnumbers its events) still ends its log, with
// error{interrupted} and done after every seq it assigned, instead of leaving a stream that
// never ends and a conversation that stays busy; the conversation takes the next ask.
func TestRefusedAppendEndsInterrupted(t *testing.T) {
	st := &refusingStore{Memory: store.NewMemory(store.MemoryOptions{})}
	st.refuse.Store(true)
	t.Cleanup(func() { _ = st.Close() })
	h := newHarness(t, server.Options{Store: st, Runner: ask.RunnerFunc(func(ctx context.Context, _ ask.Request, emit ask.Emitter) ask.Outcome {
		for i := range 3 {
			emit.Step(step(i))
		}
		return ask.Outcome{Answer: answer("never seen")}
	})})
	cid := h.conv(alice)
	ticket := h.ask(alice, cid, "will the store take it?")
	frames := h.events(alice, ticket)
	var prev int64
	terminals := 0
	for i, f := range frames {
		e := decode(t, f)
		if e.Seq <= prev {
			t.Fatalf("event %d has seq %d after %d", i, e.Seq, prev)
		}
		prev = e.Seq
		switch gen.EventType(e.Type) {
		case gen.EventTypeAnswer, gen.EventTypeAbstention, gen.EventTypeRefusal, gen.EventTypeError:
			terminals++
		case gen.EventTypeStep:
			t.Errorf("a step the store refused is in the log: %s", f.Data)
		}
	}
	if n := len(frames); n < 3 || frames[0].Event != "accepted" || frames[n-1].Event != "done" || frames[n-2].Event != "error" || terminals != 1 {
		t.Fatalf("log %v: want accepted … error, done with one terminal", types(frames))
	}
	term, done := decode(t, frames[len(frames)-2]), decode(t, frames[len(frames)-1])
	if term.Kind != string(gen.ErrorKindInterrupted) || done.Outcome != "error" {
		t.Errorf("ended %s/%s, want error{interrupted}", done.Outcome, term.Kind)
	}
	// The refused step took seq 3 (accepted 1, open 2): the end comes after it.
	if term.Seq <= 3 {
		t.Errorf("the end's first event has seq %d, want it after the refused step's seq 3", term.Seq)
	}
	if r := h.askRaw(alice, cid, "and now?"); r.StatusCode() != http.StatusAccepted {
		t.Errorf("the next ask in the conversation: %d %s, want 202", r.StatusCode(), r.Body)
	}
}
