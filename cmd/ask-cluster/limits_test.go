package main

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/conformance"
)

// testLimitsAcrossReplicas: limits the suite checks through the limits group's gateway, each
// made to span replicas directly, so that no balancing order can let one replica's own view
// pass for the store's. For every ordered pair (i, j), an ask running on replica i makes
// replica j refuse one more of the same identity's asks 429 (the in-flight cap is the store's),
// and j admits it once i's has ended. A ticket finished on the first replica and read to its
// end on every one (each replica's tail hub then holds the finished log) is 404, status and
// events, on every one past its TTL.
func testLimitsAcrossReplicas(t *testing.T, c *Cluster, l conformance.Limits) {
	urls := c.LimitsReplicaURLs
	if len(urls) < 2 {
		t.Fatalf("the limits group has %d replicas, want at least 2", len(urls))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	q := conformance.DefaultQuestions()
	cls := make([]*client.Client, len(urls))
	for i, u := range urls {
		cls[i] = clientFor(t, ctx, c, u, client.Options{})
	}
	// The TTL's ticket first, finished and read on every replica; the in-flight pairs run while
	// its TTL passes.
	conv, err := cls[0].CreateConversation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tk, _, err := cls[0].AskAndWait(ctx, conv.Id, q.Answer)
	if err != nil {
		t.Fatal(err)
	}
	doneAt := time.Now()
	for _, cl := range cls {
		for _, err := range cl.Events(ctx, tk.Ticket, client.EventsOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	for i, on := range cls {
		for j, other := range cls {
			if i == j {
				continue
			}
			c1, err := on.CreateConversation(ctx)
			if err != nil {
				t.Fatal(err)
			}
			c2, err := other.CreateConversation(ctx)
			if err != nil {
				t.Fatal(err)
			}
			run, err := on.Ask(ctx, c1.Id, q.Slow)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := other.Ask(ctx, c2.Id, q.Answer); !errors.Is(err, client.ErrTooManyRequests) {
				t.Errorf("an ask on replica %d while %d runs on replica %d: %v, want 429", j+1, l.MaxInFlight, i+1, err)
			}
			if _, err := on.Wait(ctx, run.Ticket); err != nil {
				t.Fatal(err)
			}
			if _, _, err := other.AskAndWait(ctx, c2.Id, q.Answer); err != nil {
				t.Errorf("an ask on replica %d once replica %d's ended: %v", j+1, i+1, err)
			}
		}
	}

	tm := time.NewTimer(time.Until(doneAt.Add(l.TTL + max(time.Second, l.TTL/4))))
	defer tm.Stop()
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-tm.C:
	}
	tok, err := conformance.IdPTokens{URL: c.IdPURL}.Token(ctx, conformance.A, conformance.Valid)
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range urls {
		for _, path := range []string{"/v1/asks/" + tk.Ticket, "/v1/asks/" + tk.Ticket + "/events"} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("GET %s on replica %d, %v past done (TTL %v): %d, want 404", path, i+1, time.Since(doneAt).Round(time.Millisecond), l.TTL, resp.StatusCode)
			}
		}
	}
}
