package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/conformance"
)

// testFrozenReplica: one replica SIGSTOPped (it keeps its sockets, answers nothing). Through
// the checked-in nginx config, with no client-side retry at all, every GET and every POST
// carrying an Idempotency-Key is answered within seconds, by another replica; a keyed
// createAsk the frozen replica had received is answered elsewhere, and when it thaws it does
// not run a second ask.
func testFrozenReplica(t *testing.T, c *Cluster) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// Identity B, so that these asks count against nobody else's in-flight limit.
	tok, err := conformance.IdPTokens{URL: c.IdPURL}.Token(ctx, conformance.B, conformance.Valid)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second} // far above what the gateway should take
	call := func(method, path, key, body string) (int, string, time.Duration) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, c.GatewayURL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		start := time.Now()
		resp, err := hc.Do(req)
		took := time.Since(start)
		if err != nil {
			t.Fatalf("%s %s: %v after %v", method, path, err, took)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), took
	}
	frozen := len(c.ReplicaURLs) - 1
	if err := c.Freeze(frozen); err != nil {
		t.Fatal(err)
	}
	thawed := false
	defer func() {
		if !thawed {
			_ = c.Thaw(frozen)
		}
	}()
	// The gateway's read timeout on these routes is 5 s; one pass to the next replica; the
	// bound leaves room for a slow machine, and is far below nginx's default minute.
	const bound = 12 * time.Second
	var convs []string
	var slowest time.Duration
	for i := range len(c.ReplicaURLs) {
		st, body, took := call(http.MethodPost, "/v1/conversations", "frozen-conv-"+string(rune('a'+i)), "{}")
		slowest = max(slowest, took)
		if st != http.StatusCreated || took > bound {
			t.Fatalf("keyed createConversation %d: %d after %v: %s", i, st, took, body)
		}
		convs = append(convs, strings.SplitN(strings.SplitN(body, `"id":"`, 2)[1], `"`, 2)[0])
	}
	var tickets []string
	for i, cv := range convs {
		st, body, took := call(http.MethodPost, "/v1/conversations/"+cv+"/asks", "frozen-ask-"+cv,
			`{"question":"How many sev1 incidents did we have in 2026-Q2?"}`)
		slowest = max(slowest, took)
		if st != http.StatusAccepted || took > bound {
			t.Fatalf("keyed createAsk %d: %d after %v: %s", i, st, took, body)
		}
		tickets = append(tickets, strings.SplitN(strings.SplitN(body, `"ticket":"`, 2)[1], `"`, 2)[0])
	}
	for i, tk := range tickets {
		st, body, took := call(http.MethodGet, "/v1/asks/"+tk, "", "")
		slowest = max(slowest, took)
		if st != http.StatusOK || took > bound {
			t.Fatalf("getAsk %d: %d after %v: %s", i, st, took, body)
		}
	}
	t.Logf("replica %d frozen: %d keyed creates, %d asks and %d status reads through nginx, all answered; slowest %v",
		frozen+1, len(convs), len(tickets), len(tickets), slowest.Round(time.Millisecond))

	if err := c.Thaw(frozen); err != nil {
		t.Fatal(err)
	}
	thawed = true
	if err := c.WaitReplicaReady(ctx, frozen); err != nil {
		t.Fatal(err)
	}
	// The thawed replica now works through what it had received: the keyed requests find their
	// records answered and create nothing. Each conversation has exactly one ask.
	time.Sleep(2 * time.Second)
	for _, cv := range convs {
		n := 0
		for _, m := range c.replicas {
			for _, line := range bytes.Split(m.proc().log(), []byte("\n")) {
				if bytes.Contains(line, []byte(`"msg":"ask accepted"`)) && bytes.Contains(line, []byte(`"conversation":"`+cv+`"`)) {
					n++
				}
			}
		}
		if n != 1 {
			t.Errorf("conversation %s: %d asks accepted, want 1", cv, n)
		}
	}
	// Every ask ends (the stub answers at once), so nothing stays in flight for the next test.
	for _, tk := range tickets {
		for {
			st, body, _ := call(http.MethodGet, "/v1/asks/"+tk, "", "")
			if st != http.StatusOK {
				t.Fatalf("getAsk %s after the thaw: %d %s", tk, st, body)
			}
			if !strings.Contains(body, `"state":"running"`) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
