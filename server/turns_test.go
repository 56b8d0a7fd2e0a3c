package server_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"sync"
	"testing"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestEveryAdmittedAskIsATurn holds what docs/decisions.md says an ask that did not answer
// leaves in its conversation: every ask that got its 202 is a turn once it ends, whatever
// ended it — a refusal, a failure, a cancel (here one sent before the run made any call) — in
// order, once each, resent to the model on the next ask with a short text of how it ended,
// and counted towards DAS_ASK_MAX_TURNS_PER_CONVERSATION. Refused requests leave none. On the
// in-process store and on a real Redis alike.
func TestEveryAdmittedAskIsATurn(t *testing.T) {
	stores := map[string]func(t *testing.T) store.Store{
		"memory": func(*testing.T) store.Store { return nil },
		"redis": func(t *testing.T) store.Store {
			return replicaStore(t, redistest.Start(t), "turns:"+rand.Text()+":", 0)
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var histories [][]ask.Turn
			started := make(chan string, 1)
			runner := ask.RunnerFunc(func(ctx context.Context, req ask.Request, _ ask.Emitter) ask.Outcome {
				mu.Lock()
				histories = append(histories, req.History)
				mu.Unlock()
				switch req.Question {
				case "refused one":
					return ask.Outcome{Refusal: &gen.RefusalBody{Tool: "run_query", Source: "demo", Reason: "not permitted"}}
				case "failed one":
					return ask.Outcome{Error: &gen.ErrorBody{Kind: gen.ErrorKindTransport, Message: "source unreachable"}}
				case "cancelled one":
					started <- req.Ticket
					<-ctx.Done()
					return ask.Outcome{Answer: answer("too late")}
				}
				return ask.Outcome{Answer: answer("fine")}
			})
			h := newHarness(t, server.Options{Store: open(t), MaxTurns: 4, MaxInFlight: 1, Runner: runner})
			cid := h.conv(alice)
			checkLifecycle(t, h.events(alice, h.ask(alice, cid, "refused one")), gen.EventTypeRefusal)
			checkLifecycle(t, h.events(alice, h.ask(alice, cid, "failed one")), gen.EventTypeError)
			tk := h.ask(alice, cid, "cancelled one")
			<-started
			// Refused requests while it runs: a second ask in the conversation (409) and one
			// past the identity's in-flight cap (429). Neither is a turn.
			if r := h.askRaw(alice, cid, "while one runs"); r.StatusCode() != http.StatusConflict {
				t.Fatalf("a second ask while one runs: %d %s", r.StatusCode(), r.Body)
			}
			if r := h.askRaw(alice, h.conv(alice), "over the cap"); r.StatusCode() != http.StatusTooManyRequests {
				t.Fatalf("an ask past the in-flight cap: %d %s", r.StatusCode(), r.Body)
			}
			if r := h.cancel(alice, tk); r.StatusCode() != http.StatusAccepted {
				t.Fatalf("cancel: %d %s", r.StatusCode(), r.Body)
			}
			checkLifecycle(t, h.events(alice, tk), gen.EventTypeError)
			checkLifecycle(t, h.events(alice, h.ask(alice, cid, "fourth")), gen.EventTypeAnswer)

			mu.Lock()
			last := histories[len(histories)-1]
			mu.Unlock()
			want := []ask.Turn{
				{Question: "refused one", Outcome: gen.EventTypeRefusal, Text: "refused: run_query on demo refused (not permitted)"},
				{Question: "failed one", Outcome: gen.EventTypeError, Text: "error (transport): source unreachable"},
				{Question: "cancelled one", Outcome: gen.EventTypeError, Text: "error (cancelled): the ask was cancelled"},
			}
			if len(last) != len(want) {
				t.Fatalf("the fourth ask's history: %+v, want %+v", last, want)
			}
			for i := range want {
				if last[i] != want[i] {
					t.Errorf("turn %d: got %+v, want %+v", i, last[i], want[i])
				}
			}
			// Four asks were admitted: the conversation is full, with no ticket named.
			r := h.askRaw(alice, cid, "fifth")
			p := problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusConflict)
			if p.Ticket != nil || p.Detail == nil || *p.Detail != "conversation is full; start a new one" {
				t.Errorf("the fifth ask: %s, want the full conversation's 409", r.Body)
			}
		})
	}
}
