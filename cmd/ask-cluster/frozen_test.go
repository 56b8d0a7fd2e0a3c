package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
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
	call := func(method, path, key, body string, prefer ...string) (int, string, time.Duration) {
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
		for _, p := range prefer {
			req.Header.Set("Prefer", p)
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

	// What nginx handed the frozen replica and then gave up on, passing it to the next: its
	// error log names each such request and upstream. The frozen replica holds them unanswered
	// in its sockets.
	addr := strings.TrimSuffix(strings.TrimPrefix(c.ReplicaURLs[frozen], "http://"), "/ask")
	handed := 0
	nginxLog, _ := os.ReadFile(filepath.Join(c.opts.Dir, "nginx", "error.log"))
	for _, line := range bytes.Split(nginxLog, []byte("\n")) {
		// Sent whole, then unanswered: the replica holds the request (not one whose connect timed
		// out, which never reached it).
		if bytes.Contains(line, []byte("upstream timed out")) && bytes.Contains(line, []byte("while reading response header")) &&
			bytes.Contains(line, []byte(`upstream: "http://`+addr+`/`)) &&
			bytes.Contains(line, []byte(`request: "POST `)) {
			handed++
		}
	}
	mark := len(c.replicas[frozen].proc().log())

	if err := c.Thaw(frozen); err != nil {
		t.Fatal(err)
	}
	thawed = true
	if err := c.WaitReplicaReady(ctx, frozen); err != nil {
		t.Fatal(err)
	}
	// The thawed replica now works through what it had received: the keyed requests find their
	// records answered and create nothing. The event awaited is its request line for each POST
	// it was handed (a request line is written once the handler has returned, so after any
	// admission it made); then each conversation has exactly one ask accepted (a debug line,
	// written at admission: the cluster's replicas log at debug).
	if handed == 0 {
		t.Errorf("nginx handed the frozen replica no POST: the thaw checks nothing")
	}
	if err := waitFor(ctx, func() bool {
		return countLines(c.replicas[frozen].proc().log()[mark:], `"msg":"request"`, `"method":"POST"`) >= handed
	}); err != nil {
		t.Fatalf("the thawed replica did not answer the %d POSTs it held: %v", handed, err)
	}
	t.Logf("thawed, replica %d answered the %d POSTs nginx had handed it", frozen+1, handed)
	for _, cv := range convs {
		n := 0
		for _, m := range c.replicas {
			n += countLines(m.proc().log(), `"msg":"ask accepted"`, `"conversation":"`+cv+`"`)
		}
		if n != 1 {
			t.Errorf("conversation %s: %d asks accepted, want 1", cv, n)
		}
	}
	// Every ask ends (the stub answers at once), so nothing stays in flight for the next test:
	// each status read waits (Prefer: wait) for the ticket's state to change.
	for _, tk := range tickets {
		if err := waitFor(ctx, func() bool {
			st, body, _ := call(http.MethodGet, "/v1/asks/"+tk, "", "", "wait=10")
			if st != http.StatusOK {
				t.Fatalf("getAsk %s after the thaw: %d %s", tk, st, body)
			}
			return !strings.Contains(body, `"state":"running"`)
		}); err != nil {
			t.Fatalf("ticket %s still running: %v", tk, err)
		}
	}
}

// countLines counts the lines of log holding every one of needles.
func countLines(log []byte, needles ...string) int {
	n := 0
	for _, line := range bytes.Split(log, []byte("\n")) {
		all := len(line) > 0
		for _, nd := range needles {
			all = all && bytes.Contains(line, []byte(nd))
		}
		if all {
			n++
		}
	}
	return n
}

// waitFor checks cond until it holds or ctx ends, each check a few milliseconds after the
// last: a condition on the processes' observable state, not a fixed wait.
func waitFor(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
