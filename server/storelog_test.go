package server_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestStoreRefusalIsLogged: a request the store cannot serve (here a real Redis at its maxmemory
// refusing writes) is a 503 for the client and a warn line for the operator, naming the route
// and the store's error, never the question. Found by an operator's audit: Redis refused every
// create for memory (every replica ready, docs/scale-out.md "Sizing Redis") and askd wrote no
// line at all but the request's own `status: 503`, so the log never said why.
func TestStoreRefusalIsLogged(t *testing.T) {
	srv := redistest.Start(t)
	h := newHarness(t, server.Options{Store: replicaStore(t, srv, "storelog:"+rand.Text()+":", 5*time.Second)})
	cid := h.conv(alice)
	redistest.Fill(t, srv)
	q := "How many sev1 incidents did we have in 2026-Q2? STORELOGQUESTION"
	h.secret(q)
	r := h.askRaw(alice, cid, q)
	problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)

	var found bool
	for line := range strings.Lines(h.logs.String()) {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || l["msg"] != "store unavailable: request answered 503" {
			continue
		}
		found = true
		if l["level"] != "WARN" || !strings.HasSuffix(l["route"].(string), "/asks") || !strings.Contains(l["err"].(string), "OOM") {
			t.Errorf("the store's refusal logged as %s", line)
		}
	}
	if !found {
		t.Errorf("no warn line for the store's refusal of a create; the log:\n%s", h.logs.String())
	}
	if strings.Contains(h.logs.String(), "STORELOGQUESTION") {
		t.Error("the question is in the log")
	}
}

// TestStoreOutageLogIsBounded: an outage of the store logs its first 503 at once, not every
// one after it (a line per request flooded the log at the request rate for as long as Redis
// was away), and its end once a request is served again, with the count of 503s answered.
func TestStoreOutageLogIsBounded(t *testing.T) {
	srv := redistest.Start(t)
	h := newHarness(t, server.Options{Store: replicaStore(t, srv, "storelog:"+rand.Text()+":", 5*time.Second)})
	cid := h.conv(alice)
	makeRoom := redistest.Fill(t, srv)
	const refused = 5
	for range refused {
		r := h.askRaw(alice, cid, "How many sev1 incidents did we have in 2026-Q2?")
		problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)
	}
	makeRoom()
	if r := h.askRaw(alice, cid, "How many sev1 incidents did we have in 2026-Q2?"); r.StatusCode() != http.StatusAccepted {
		t.Fatalf("once Redis has room: %d %s", r.StatusCode(), r.Body)
	}

	var warned, recovered []map[string]any
	for line := range strings.Lines(h.logs.String()) {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		switch l["msg"] {
		case "store unavailable: request answered 503":
			warned = append(warned, l)
		case "store available again: requests served":
			recovered = append(recovered, l)
		}
	}
	if len(warned) != 1 || warned[0]["suppressed"] != float64(0) {
		t.Errorf("%d requests refused within seconds logged %d warn lines, want 1 with suppressed 0: %v", refused, len(warned), warned)
	}
	if len(recovered) != 1 || recovered[0]["level"] != "INFO" || recovered[0]["answered_503"] != float64(refused) {
		t.Errorf("the outage's end logged as %v, want one info line with answered_503 %d", recovered, refused)
	} else if _, ok := recovered[0]["unavailable_ms"].(float64); !ok {
		t.Errorf("the outage's end logged as %v, without unavailable_ms", recovered[0])
	}
}

// TestLeaseRenewalFailuresLogBounded: while Redis refuses writes (full), every running ask's
// lease renewal fails at each of its ticks; the log says so once, not once per ask per tick (a
// line each wrote some 500 lines for 100 running asks in a 20 s outage), and says once that the
// leases are renewed again, with how many renewals failed.
func TestLeaseRenewalFailuresLogBounded(t *testing.T) {
	srv := redistest.Start(t)
	const runs = 3
	started, release := make(chan string, runs), make(chan struct{})
	runner := ask.RunnerFunc(func(ctx context.Context, req ask.Request, _ ask.Emitter) ask.Outcome {
		started <- req.Ticket
		select {
		case <-release:
		case <-ctx.Done():
		}
		return ask.Outcome{Answer: answer("ok")}
	})
	// A lease of 6 s: renewed every 2 s, so each run's first renewal on a full Redis fails some
	// 2 s in, and its run is stopped only 6 s after its last write.
	h := newHarness(t, server.Options{Store: replicaStore(t, srv, "leaselog:"+rand.Text()+":", 6*time.Second), Runner: runner})
	var tickets []string
	for range runs {
		tickets = append(tickets, h.ask(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q2?"))
		within(t, started, "the run's start")
	}
	makeRoom := redistest.Fill(t, srv)
	rc := raw(t, srv)
	refused := oomRefusals(t, rc)
	redistest.Poll(t, "every run's renewal refused for memory", func() bool { return oomRefusals(t, rc) >= refused+runs })
	makeRoom()
	redistest.Poll(t, "the leases renewed again", func() bool { return strings.Contains(h.logs.String(), `"msg":"leases renewed again"`) })
	close(release)
	for _, tk := range tickets {
		checkLifecycle(t, h.events(alice, tk), gen.EventTypeAnswer)
	}

	var warned, renewed []map[string]any
	for line := range strings.Lines(h.logs.String()) {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		switch l["msg"] {
		case "lease not renewed; retrying":
			warned = append(warned, l)
		case "leases renewed again":
			renewed = append(renewed, l)
		}
	}
	if len(renewed) != 1 || renewed[0]["level"] != "INFO" {
		t.Fatalf("the renewals' recovery logged as %v, want one info line", renewed)
	}
	failures, _ := renewed[0]["failures"].(float64)
	if failures < 2 {
		t.Fatalf("%v renewals failed: the test did not make several fail", failures)
	}
	if len(warned) != 1 || warned[0]["level"] != "WARN" || warned[0]["ticket"] == nil {
		t.Errorf("%v failed renewals logged %d warn lines, want 1 naming a ticket: %v", failures, len(warned), warned)
	}
}
