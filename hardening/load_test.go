package hardening_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/server"
)

// What each ask of the load test does besides asking.
const (
	followToEnd = iota
	cancelAtOnce
	disconnectEarly
	cancelWhileStreaming
	behaviours
)

// Thousands of asks at once across identities, with a mix of cancels and disconnects, against
// the whole stack (llm-stub at zero delay). Every admitted ticket is then read back from seq 0:
// one branch open and close, exactly one terminal and one done (last), seq gap-free, done.steps
// equal to the steps in the log; a ticket cancelled before its end says error{cancelled}. No
// ticket is lost. After the TTL every ticket is gone, the heap is back near its baseline, and
// once the stack is closed no goroutine is left.
//
// The full run makes 2000 asks (about 45 s on two cores), 1000 under the race detector (about
// 60 s), 300 with -short. Every run stops by itself.
func TestLoadAndSoak(t *testing.T) {
	asks := 2000
	switch {
	case testing.Short():
		asks = 300
	case raceEnabled:
		asks = 1000
	}
	const (
		identities = 40
		workers    = 48
		ttl        = 5 * time.Second
	)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	cfg := server.DefaultConfig()
	cfg.MaxInFlight = workers // admission limits are not what this test is about
	cfg.TTL = ttl
	cfg.Deadline = 60 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel() // before goleak: it also ends the validators' JWKS refresh
	s, err := stack.Start(ctx, stack.Options{Service: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	a := newAPI(s.AskURL)

	tokens := make([]string, identities)
	for i := range tokens {
		oid := fmt.Sprintf("user-%02d", i)
		if i == 0 {
			oid = "alice"
		}
		tokens[i] = mint(t, s.IdP, idp.Claims{OID: oid, TTL: time.Hour})
	}
	questions := []string{qCFR, qSev1, qChurn, qOncall, qTopTeam}

	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)

	var (
		mu      sync.Mutex
		tickets []string
		owners  = map[string]string{}
		done    atomic.Int64
		outcome = map[string]int{}
	)
	work := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for i := range work {
				if ctx.Err() != nil {
					return
				}
				tok := tokens[i%identities]
				cid := a.conversation(ctx, t, tok)
				ticket := a.ask(ctx, t, tok, cid, questions[i%len(questions)])
				mu.Lock()
				tickets = append(tickets, ticket)
				owners[ticket] = tok
				mu.Unlock()

				how := i % behaviours
				cancelled := false
				switch how {
				case cancelAtOnce:
					if r := a.do(ctx, t, http.MethodPost, "/v1/asks/"+ticket+"/cancel", tok, nil, nil); r.status != http.StatusAccepted {
						t.Errorf("cancel: %d %s", r.status, r.body)
					}
					cancelled = true
				case disconnectEarly, cancelWhileStreaming:
					resp := a.openStream(ctx, t, tok, ticket, "")
					fr := newFrameReader(resp.Body)
					for range 2 {
						if _, err := fr.next(); err != nil {
							t.Errorf("ticket %s: %v", ticket, err)
							break
						}
					}
					if how == cancelWhileStreaming {
						a.do(ctx, t, http.MethodPost, "/v1/asks/"+ticket+"/cancel", tok, nil, nil)
						cancelled = true
					}
					resp.Body.Close()
				}
				// Every ticket, whatever happened to its first reader, replays whole from 0.
				frames := a.events(ctx, t, tok, ticket, "")
				term := checkLog(t, frames, 1, false)
				steps := 0
				for _, f := range frames {
					if f.typ == "step" {
						steps++
					}
				}
				if last := frames[len(frames)-1].env(t); last.Steps != int64(steps) {
					t.Errorf("ticket %s: done.steps %d, %d step events", ticket, last.Steps, steps)
				}
				if cancelled && term.Type == "error" && term.Kind != "cancelled" {
					t.Errorf("ticket %s cancelled, ended error{%s}", ticket, term.Kind)
				}
				mu.Lock()
				outcome[term.Type+"/"+term.Kind]++
				mu.Unlock()
				done.Add(1)
			}
		})
	}
	for i := range asks {
		work <- i
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start)
	if t.Failed() {
		s.Close()
		return
	}
	if int(done.Load()) != asks || len(tickets) != asks {
		t.Fatalf("%d asks checked, %d tickets, want %d", done.Load(), len(tickets), asks)
	}
	t.Logf("%d asks in %s; outcomes %v", asks, elapsed.Round(time.Millisecond), outcome)

	runtime.GC()
	var peak runtime.MemStats
	runtime.ReadMemStats(&peak)

	// Every ticket is retrievable until the TTL, then gone: wait for the last one to go.
	last := tickets[len(tickets)-1]
	if st := a.status(ctx, t, owners[last], last, 0); st.Done == nil {
		t.Fatalf("ticket %s lost its done", last)
	}
	// The TTL is a real timer in a real stack (no synctest over sockets): poll for every
	// ticket's eviction, bounded by three TTLs in all.
	poll := time.NewTicker(250 * time.Millisecond)
	defer poll.Stop()
	giveUp := time.After(3 * ttl)
	for _, tk := range tickets {
		for {
			r := a.do(ctx, t, http.MethodGet, "/v1/asks/"+tk, owners[tk], nil, nil)
			if r.status == http.StatusNotFound {
				break
			}
			if r.status != http.StatusOK {
				t.Fatalf("ticket %s: %d %s", tk, r.status, r.body)
			}
			select {
			case <-poll.C:
			case <-giveUp:
				t.Fatalf("ticket %s still retained %s after the load, TTL %s", tk, 3*ttl, ttl)
			}
		}
	}
	a.close()
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	t.Logf("heap: baseline %d MB, after the load %d MB, after eviction %d MB",
		base.HeapAlloc>>20, peak.HeapAlloc>>20, after.HeapAlloc>>20)
	if grown := int64(after.HeapAlloc) - int64(base.HeapAlloc); grown > 16<<20 {
		t.Errorf("heap %d MB above its baseline after every ticket was evicted", grown>>20)
	}

	if err := s.Close(); err != nil {
		t.Errorf("stack.Close: %v", err)
	}
	cancel()
}
