package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// The service's hot paths over each store, side by side: the figures in docs/scale-out.md.
// Requests go through the whole handler stack (auth, validation, handlers) over an in-memory
// transport, so what differs between the two columns is the store.

// benchStores runs f once per store: the in-memory default and Redis on loopback.
func benchStores(b *testing.B, f func(b *testing.B, st func(b *testing.B) store.Store)) {
	b.Run("memory", func(b *testing.B) {
		f(b, func(*testing.B) store.Store { return nil })
	})
	b.Run("redis", func(b *testing.B) {
		srv := redistest.Start(b)
		f(b, func(b *testing.B) store.Store {
			s, err := redisstore.New(b.Context(), redisstore.Options{URL: srv.URL, Prefix: "bench:" + rand.Text() + ":", MaxEvents: 100_000})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		})
	})
}

// stepsRunner reports n steps as fast as it can, then answers.
func stepsRunner(n int) ask.Runner {
	return ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		for i := range n {
			emit.Step(step(i))
		}
		return ask.Outcome{Answer: answer("42")}
	})
}

// BenchmarkTimeToTicket is POST /v1/conversations/{cid}/asks answered 202 (the conversation is
// made outside the timer; each ask's run is trivial and ends before the next).
func BenchmarkTimeToTicket(b *testing.B) {
	benchStores(b, func(b *testing.B, st func(b *testing.B) store.Store) {
		h := newHarness(b, server.Options{Store: st(b), Runner: stepsRunner(0), MaxInFlight: 1 << 20, MaxTickets: 1 << 22,
			MaxConversationsPerID: 1 << 22, MaxRetainedPerID: 1 << 22})
		for b.Loop() {
			b.StopTimer()
			cid := h.conv(alice)
			b.StartTimer()
			r, err := h.c.CreateAsk(context.Background(), cid, nil, gen.AskRequest{Question: "How many sev1 incidents did we have in 2026-Q2?"}, bearer(alice))
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
			if r.StatusCode != http.StatusAccepted {
				b.Fatalf("ask: %d", r.StatusCode)
			}
		}
	})
}

// BenchmarkReplay is GET /v1/asks/{ticket}/events of a finished 1000-event log from the start:
// the whole log replayed and the stream closed. Reported per event.
func BenchmarkReplay(b *testing.B) {
	const steps = 995 // + accepted, branch open, branch close, answer, done
	benchStores(b, func(b *testing.B, st func(b *testing.B) store.Store) {
		h := newHarness(b, server.Options{Store: st(b), Runner: stepsRunner(steps)})
		ticket := h.ask(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
		if n := len(h.events(alice, ticket)); n != steps+5 {
			b.Fatalf("%d events, want %d", n, steps+5)
		}
		for b.Loop() {
			resp := h.stream(context.Background(), alice, ticket, nil)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(steps+5), "ns/event")
	})
}

// BenchmarkDelivery is a run emitting 1000 steps as fast as it can while one client follows
// its stream live, from the ask to the stream's end. Reported per event.
func BenchmarkDelivery(b *testing.B) {
	const steps = 995
	benchStores(b, func(b *testing.B, st func(b *testing.B) store.Store) {
		h := newHarness(b, server.Options{Store: st(b), Runner: stepsRunner(steps), MaxInFlight: 1 << 20, MaxTickets: 1 << 22,
			MaxConversationsPerID: 1 << 22, MaxRetainedPerID: 1 << 22})
		for b.Loop() {
			b.StopTimer()
			cid := h.conv(alice)
			b.StartTimer()
			ticket := h.ask(alice, cid, "How many sev1 incidents did we have in 2026-Q2?")
			resp := h.stream(context.Background(), alice, ticket, nil)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(steps+5), "ns/event")
	})
}

// BenchmarkCreateAskHandler is the service's own cost of an ask, from the request reaching its
// handler to the run's end: the whole handler stack and the run, with a bearer check that costs
// nothing (the JWT check is the bare baseline's too, see bench/) and no network, one ask at a
// time. The conversation is made outside the timer.
func BenchmarkCreateAskHandler(b *testing.B) {
	ended := make(chan struct{}, 1)
	srv, err := server.New(server.Options{Authenticator: fakeAuth{}, Runner: stepsRunner(0), MaxInFlight: 1 << 20, MaxTickets: 1 << 22,
		MaxConversationsPerID: 1 << 22, MaxRetainedPerID: 1 << 22,
		Hooks: server.Hooks{Ended: func(string, server.End) { ended <- struct{}{} }}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	h := srv.Handler()
	body := []byte(`{"question":"How many sev1 incidents did we have in 2026-Q2?"}`)
	serve := func(method, path string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+alice)
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	convs := make([]string, b.N)
	for i := range convs {
		w := serve(http.MethodPost, "/ask/v1/conversations", []byte(`{}`))
		var conv gen.Conversation
		if w.Code != http.StatusCreated || json.Unmarshal(w.Body.Bytes(), &conv) != nil {
			b.Fatalf("conversation: %d %s", w.Code, w.Body)
		}
		convs[i] = "/ask/v1/conversations/" + conv.Id + "/asks"
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if w := serve(http.MethodPost, convs[i], body); w.Code != http.StatusAccepted {
			b.Fatalf("ask: %d %s", w.Code, w.Body)
		}
		<-ended
	}
}
