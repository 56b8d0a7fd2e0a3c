package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
)

// TestKeyedRetryAnsweredWhileDraining: while the server drains, a create retried with the
// Idempotency-Key of one it made is answered as before (the same 202 or 201, replayed), so a
// client that lost that answer learns the ticket of the run still going through the grace; a
// key that made nothing is 503, as an unkeyed create is, and creates nothing, its key freed.
func TestKeyedRetryAnsweredWhileDraining(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int64
		h := newHarness(t, server.Options{ShutdownGrace: time.Minute, Runner: ask.RunnerFunc(func(ctx context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome {
			runs.Add(1)
			select {
			case <-time.After(10 * time.Second):
			case <-ctx.Done():
			}
			return ask.Outcome{Answer: answer("ok")}
		})})
		const q = "How many sev1 incidents did we have in 2026-Q2?"
		conv := h.keyedConv(alice, "c-1")
		if conv.JSON201 == nil {
			t.Fatalf("keyed conversation: %d %s", conv.StatusCode(), conv.Body)
		}
		first := h.keyedAsk(alice, conv.JSON201.Id, "k-1", q)
		if first.JSON202 == nil {
			t.Fatalf("keyed ask: %d %s", first.StatusCode(), first.Body)
		}

		shutdown := make(chan error)
		go func() { shutdown <- h.srv.Shutdown(context.Background()) }()
		synctest.Wait()
		if r := h.askRaw(alice, conv.JSON201.Id, q); r.StatusCode() != http.StatusServiceUnavailable {
			t.Fatalf("an unkeyed ask while draining: %d, want 503 (the server is not draining yet?)", r.StatusCode())
		}

		again := h.keyedAsk(alice, conv.JSON201.Id, "k-1", q)
		if again.StatusCode() != http.StatusAccepted || string(again.Body) != string(first.Body) ||
			again.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("the ask's retry while draining: %d %s (replayed %q), want its 202 %s replayed",
				again.StatusCode(), again.Body, again.HTTPResponse.Header.Get("Idempotent-Replayed"), first.Body)
		}
		convAgain := h.keyedConv(alice, "c-1")
		if convAgain.StatusCode() != http.StatusCreated || string(convAgain.Body) != string(conv.Body) {
			t.Errorf("the conversation's retry while draining: %d %s, want its 201 %s", convAgain.StatusCode(), convAgain.Body, conv.Body)
		}

		for range 2 { // the second finds the key free, not held by the first: 503 again, not 409
			r := h.keyedAsk(alice, conv.JSON201.Id, "k-new", q)
			problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)
			if r.HTTPResponse.Header.Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
			c := h.keyedConv(alice, "c-new")
			problemOf(t, c.StatusCode(), c.HTTPResponse.Header.Get("Content-Type"), c.Body, http.StatusServiceUnavailable)
		}

		frames := h.events(alice, first.JSON202.Ticket)
		checkLifecycle(t, frames, gen.EventTypeAnswer)
		if err := <-shutdown; err != nil {
			t.Fatal(err)
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("%d runs, want the one", n)
		}
	})
}

// TestDrainingRefusalIsMisdirectedToAGateway: a draining server's refusal of a create is 421 to a
// request that carries RerouteHeader (the reference gateway's, which passes a 421 to another
// replica: nginx cannot pass a POST's 503 on, which may follow a create made), keyed or not, its
// key freed; a request without the header gets the 503 as before, and the header changes nothing
// for a request the draining server serves.
func TestDrainingRefusalIsMisdirectedToAGateway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{ShutdownGrace: time.Minute, Runner: ask.RunnerFunc(func(ctx context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome {
			select {
			case <-time.After(10 * time.Second):
			case <-ctx.Done():
			}
			return ask.Outcome{Answer: answer("ok")}
		})})
		const q = "How many sev1 incidents did we have in 2026-Q2?"
		cid := h.conv(alice)
		ticket := h.ask(alice, cid, q)
		shutdown := make(chan error)
		go func() { shutdown <- h.srv.Shutdown(context.Background()) }()
		synctest.Wait()

		reroute := header(server.RerouteHeader, "1")
		misdirected := func(what string, r *http.Response, body []byte) {
			t.Helper()
			problemOf(t, r.StatusCode, r.Header.Get("Content-Type"), body, http.StatusMisdirectedRequest)
			if r.Header.Get("Retry-After") == "" {
				t.Errorf("%s: 421 without Retry-After", what)
			}
		}
		for range 2 { // the second finds the key freed by the first: 421 again, not 409
			a, err := h.cw.CreateAskWithResponse(context.Background(), cid, nil, gen.AskRequest{Question: q}, bearer(alice), reroute)
			if err != nil {
				t.Fatal(err)
			}
			misdirected("an ask", a.HTTPResponse, a.Body)
			k, err := h.cw.CreateAskWithResponse(context.Background(), cid, idemKey("k-new"), gen.AskRequest{Question: q}, bearer(alice), reroute)
			if err != nil {
				t.Fatal(err)
			}
			misdirected("a keyed ask", k.HTTPResponse, k.Body)
			c, err := h.cw.CreateConversationWithResponse(context.Background(), nil, gen.CreateConversationRequest{}, bearer(alice), reroute)
			if err != nil {
				t.Fatal(err)
			}
			misdirected("a conversation", c.HTTPResponse, c.Body)
			key := "c-new"
			kc, err := h.cw.CreateConversationWithResponse(context.Background(), &gen.CreateConversationParams{IdempotencyKey: &key}, gen.CreateConversationRequest{}, bearer(alice), reroute)
			if err != nil {
				t.Fatal(err)
			}
			misdirected("a keyed conversation", kc.HTTPResponse, kc.Body)
		}
		if r := h.askRaw(alice, cid, q); r.StatusCode() != http.StatusServiceUnavailable {
			t.Errorf("an ask without the header while draining: %d, want 503", r.StatusCode())
		}
		if r := h.status(alice, ticket, reroute); r.StatusCode() != http.StatusOK {
			t.Errorf("a status read with the header while draining: %d, want 200", r.StatusCode())
		}
		if err := <-shutdown; err != nil {
			t.Fatal(err)
		}
	})
}

// TestDrainingKeepsATakenOverKey: a keyed retry that a draining replica refuses after taking
// the key's record over from an attempt stalled past its lock (its ticket not found: the
// stalled attempt has not made it yet) gives the record back to that attempt rather than
// free it. Freed, the stalled attempt, coming back, made its ticket and completed on a record
// that was gone (202, run), and the client's next retry, on another replica, made and ran a
// second ticket under the same key. Given back, the stalled attempt completes it, and the key
// answers one ticket, run once.
func TestDrainingKeepsATakenOverKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int64
		hold := make(chan struct{})
		g := &gatedStore{Memory: store.NewMemory(store.MemoryOptions{}), holdCreate: hold, reachedCreate: make(chan struct{})}
		live := newHarness(t, server.Options{Store: g, Runner: countingRunner(&runs)})
		draining := newHarness(t, server.Options{Store: g, Runner: countingRunner(&runs), ShutdownGrace: time.Minute})
		cid := live.conv(alice)
		const q = "How many sev1 incidents did we have in 2026-Q2?"

		stalled := make(chan *gen.CreateAskResponse, 1)
		go func() { stalled <- live.keyedAsk(alice, cid, "k", q) }()
		<-g.reachedCreate
		if err := draining.srv.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(11 * time.Second) // past the stalled attempt's lock
		r := draining.keyedAsk(alice, cid, "k", q)
		problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)

		close(hold) // the stalled attempt's ticket is made now
		first := <-stalled
		synctest.Wait()
		time.Sleep(11 * time.Second) // past the draining replica's lock, if it kept one
		retry := live.keyedAsk(alice, cid, "k", q)
		if retry.StatusCode() != http.StatusAccepted {
			t.Fatalf("the retry on a live replica: %d %s", retry.StatusCode(), retry.Body)
		}
		live.events(alice, retry.JSON202.Ticket)
		if first.StatusCode() == http.StatusAccepted && first.JSON202.Ticket != retry.JSON202.Ticket {
			t.Errorf("one key answered two tickets: %s to the stalled attempt, %s to the retry", first.JSON202.Ticket, retry.JSON202.Ticket)
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("%d runs under one key, want 1", n)
		}
	})
}

// TestCreatesWhileDraining: every cell of a draining replica's answer to a create, for both
// creates: without a key, and with a key that finds nothing, refused (503 + Retry-After, or 421
// + Retry-After to a request with RerouteHeader), counted as shutting_down, making nothing and
// leaving the key free (so the same again is refused the same way, never 409); with the key of
// a create made before the drain, its recorded response, replayed, whatever the header.
func TestCreatesWhileDraining(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int64
		var refusals atomic.Int64
		h := newHarness(t, server.Options{ShutdownGrace: time.Minute,
			Runner: ask.RunnerFunc(func(ctx context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome {
				runs.Add(1)
				select {
				case <-time.After(10 * time.Second):
				case <-ctx.Done():
				}
				return ask.Outcome{Answer: answer("ok")}
			}),
			Hooks: server.Hooks{Refused: func(_ context.Context, reason string) {
				if reason == server.RefusedShuttingDown {
					refusals.Add(1)
				}
			}},
		})
		const q = "How many sev1 incidents did we have in 2026-Q2?"
		conv := h.keyedConv(alice, "c-made")
		if conv.JSON201 == nil {
			t.Fatalf("keyed conversation: %d %s", conv.StatusCode(), conv.Body)
		}
		cid := conv.JSON201.Id
		made := h.keyedAsk(alice, cid, "a-made", q)
		if made.JSON202 == nil {
			t.Fatalf("keyed ask: %d %s", made.StatusCode(), made.Body)
		}
		shutdown := make(chan error)
		go func() { shutdown <- h.srv.Shutdown(context.Background()) }()
		synctest.Wait()

		create := map[string]func(key string, edit ...gen.RequestEditorFn) (*http.Response, []byte){
			"createConversation": func(key string, edit ...gen.RequestEditorFn) (*http.Response, []byte) {
				var params *gen.CreateConversationParams
				if key != "" {
					params = &gen.CreateConversationParams{IdempotencyKey: &key}
				}
				r, err := h.cw.CreateConversationWithResponse(context.Background(), params, gen.CreateConversationRequest{}, append(edit, bearer(alice))...)
				if err != nil {
					t.Fatal(err)
				}
				return r.HTTPResponse, r.Body
			},
			"createAsk": func(key string, edit ...gen.RequestEditorFn) (*http.Response, []byte) {
				var params *gen.CreateAskParams
				if key != "" {
					params = idemKey(key)
				}
				r, err := h.cw.CreateAskWithResponse(context.Background(), cid, params, gen.AskRequest{Question: q}, append(edit, bearer(alice))...)
				if err != nil {
					t.Fatal(err)
				}
				return r.HTTPResponse, r.Body
			},
		}
		recorded := map[string]struct {
			key    string
			status int
			body   []byte
		}{
			"createConversation": {"c-made", http.StatusCreated, conv.Body},
			"createAsk":          {"a-made", http.StatusAccepted, made.Body},
		}
		headers := map[string][]gen.RequestEditorFn{"direct": nil, "rerouted": {header(server.RerouteHeader, "1")}}
		refusal := map[string]int{"direct": http.StatusServiceUnavailable, "rerouted": http.StatusMisdirectedRequest}
		wantRefusals := int64(0)
		for op, do := range create {
			for via, edit := range headers {
				for _, key := range []string{"", "k-new-" + op + "-" + via} {
					for try := range 2 { // the second finds the key freed by the first: refused again, not 409
						r, body := do(key, edit...)
						what := fmt.Sprintf("%s %s, key %q, try %d", op, via, key, try+1)
						if r.StatusCode != refusal[via] || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") ||
							r.Header.Get("Retry-After") == "" {
							t.Errorf("%s: %d %q (Retry-After %q) %s, want %d problem+json with Retry-After",
								what, r.StatusCode, r.Header.Get("Content-Type"), r.Header.Get("Retry-After"), body, refusal[via])
						}
						wantRefusals++
					}
				}
				rec := recorded[op]
				r, body := do(rec.key, edit...)
				if r.StatusCode != rec.status || string(body) != string(rec.body) || r.Header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("%s %s, the key of a create made: %d %s (replayed %q), want %d %s replayed",
						op, via, r.StatusCode, body, r.Header.Get("Idempotent-Replayed"), rec.status, rec.body)
				}
			}
		}
		if n := refusals.Load(); n != wantRefusals {
			t.Errorf("%d refusals counted shutting_down, want %d", n, wantRefusals)
		}
		checkLifecycle(t, h.events(alice, made.JSON202.Ticket), gen.EventTypeAnswer)
		if err := <-shutdown; err != nil {
			t.Fatal(err)
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("%d runs, want the one made before the drain", n)
		}
	})
}

// blockOrCount runs the question "block" until it is cancelled, taking its identity's
// in-flight slot; it answers any other at once, counting it in runs.
func blockOrCount(runs *atomic.Int64) ask.Runner {
	return ask.RunnerFunc(func(ctx context.Context, req ask.Request, _ ask.Emitter) ask.Outcome {
		if req.Question == "block" {
			<-ctx.Done()
			return ask.Outcome{Answer: answer("cancelled")}
		}
		runs.Add(1)
		return ask.Outcome{Answer: answer("42")}
	})
}

// TestRefusedTakeoverGivesTheKeyBack: any refusal of a keyed retry that took the key's record
// over from an attempt stalled past its lock gives the record back to that attempt (here a
// 429: the identity's one in-flight ask still runs), so that the stalled attempt, coming back
// once the other ask has ended, records the ticket it made, and the client's next retry is
// answered that ticket. Freed instead, the stalled attempt completed on a record that was gone
// (202, run, nothing recorded), and the next retry made and ran a second ticket under the key.
func TestRefusedTakeoverGivesTheKeyBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var runs atomic.Int64
		g := &gatedStore{Memory: store.NewMemory(store.MemoryOptions{}), reachedCreate: make(chan struct{})}
		runner := blockOrCount(&runs)
		h := newHarness(t, server.Options{Store: g, Runner: runner, MaxInFlight: 1})
		blocker := h.ask(alice, h.conv(alice), "block")
		cid := h.conv(alice)
		const q = "How many sev1 incidents did we have in 2026-Q2?"

		release, stalled := g.stallKeyedAsk(h, cid, "k", q)
		r := h.keyedAsk(alice, cid, "k", q)
		problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusTooManyRequests)

		h.cancel(alice, blocker)
		h.events(alice, blocker)
		release() // the stalled attempt's ticket is made now
		first := <-stalled
		if first.StatusCode() != http.StatusAccepted {
			t.Fatalf("the stalled attempt: %d %s", first.StatusCode(), first.Body)
		}
		synctest.Wait()
		time.Sleep(11 * time.Second) // past any lock the refused retry kept
		retry := h.keyedAsk(alice, cid, "k", q)
		if retry.StatusCode() != http.StatusAccepted {
			t.Fatalf("the next retry: %d %s", retry.StatusCode(), retry.Body)
		}
		h.events(alice, retry.JSON202.Ticket)
		if first.JSON202.Ticket != retry.JSON202.Ticket {
			t.Errorf("one key answered two tickets: %s to the stalled attempt, %s to the retry", first.JSON202.Ticket, retry.JSON202.Ticket)
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("%d runs under one key, want 1", n)
		}
	})
}

// secondCreateGate holds the second CreateTicket of question q until second is closed.
type secondCreateGate struct {
	*gatedStore
	q        string
	n        atomic.Int32
	reached2 chan struct{}
	second   chan struct{}
}

func (s *secondCreateGate) CreateTicket(ctx context.Context, nt store.NewTicket, l store.Limits) ([]ask.Turn, error) {
	if nt.Question == s.q && s.n.Add(1) == 2 {
		close(s.reached2)
		<-s.second
	}
	return s.gatedStore.CreateTicket(ctx, nt, l)
}

// TestRefusedTakeoverDoesNotGiveBackAnUndoneAsk: a stalled attempt made its ticket after a
// retry had taken the record over, learnt so and ended it unrun (error{cancelled}); the retry
// was then refused. The record must not go back to the stalled attempt, as it did until
// 2026-12-07: the next retry took it over, found that ended ticket and answered it, so the key's
// question never ran and its caller was told of an ask it had not cancelled ending cancelled.
func TestRefusedTakeoverDoesNotGiveBackAnUndoneAsk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const q = "How many sev1 incidents did we have in 2026-Q2?"
		var runs atomic.Int64
		g := &secondCreateGate{gatedStore: &gatedStore{Memory: store.NewMemory(store.MemoryOptions{}), reachedCreate: make(chan struct{})},
			q: q, reached2: make(chan struct{}), second: make(chan struct{})}
		runner := blockOrCount(&runs)
		h := newHarness(t, server.Options{Store: g, Runner: runner, MaxInFlight: 1})
		cid := h.conv(alice)

		release, stalled := g.stallKeyedAsk(h, cid, "k", q)
		refused := make(chan *gen.CreateAskResponse, 1)
		go func() { refused <- h.keyedAsk(alice, cid, "k", q) }() // takes the record over
		<-g.reached2

		release() // the stalled attempt makes its ticket, finds the record taken and ends it
		if first := <-stalled; first.StatusCode() != http.StatusConflict {
			t.Fatalf("the stalled attempt: %d %s, want 409", first.StatusCode(), first.Body)
		}
		synctest.Wait()
		blocker := h.ask(alice, h.conv(alice), "block")
		close(g.second) // the takeover's ticket is refused: the in-flight cap
		r := <-refused
		problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusTooManyRequests)
		h.cancel(alice, blocker)
		h.events(alice, blocker)

		retry := h.keyedAsk(alice, cid, "k", q)
		if retry.StatusCode() != http.StatusAccepted {
			t.Fatalf("the next retry: %d %s", retry.StatusCode(), retry.Body)
		}
		frames := h.events(alice, retry.JSON202.Ticket)
		if end := frames[len(frames)-2]; end.Event != "answer" {
			t.Errorf("the key's ask ended %q: %s, want its answer", end.Event, end.Data)
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("%d runs under the key, want 1", n)
		}
	})
}
