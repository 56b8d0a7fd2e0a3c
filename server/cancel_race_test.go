package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/server"
)

// cancelOnTicket is a ResponseWriter for createAsk that, as the 202's body is written, cancels
// the ticket through the same handler: a client that cancels the instant it reads its ticket,
// before the service has had any chance to start the run. Before cancelling it notes the
// ticket's last_seq, so the test can tell what the log took after the cancel.
type cancelOnTicket struct {
	*httptest.ResponseRecorder
	t       *testing.T
	h       http.Handler
	ticket  string
	before  int64
	cancels int
}

func (w *cancelOnTicket) Write(b []byte) (int, error) {
	if w.Code == http.StatusAccepted && w.ticket == "" {
		var tk struct {
			Ticket string `json:"ticket"`
		}
		if err := json.Unmarshal(b, &tk); err != nil || tk.Ticket == "" {
			w.t.Errorf("the 202 body %q names no ticket", b)
		} else {
			w.ticket = tk.Ticket
			st := w.call(http.MethodGet, "/ask/v1/asks/"+tk.Ticket)
			var s struct {
				LastSeq int64 `json:"last_seq"`
			}
			_ = json.Unmarshal(st.Body.Bytes(), &s)
			w.before = s.LastSeq
			if c := w.call(http.MethodPost, "/ask/v1/asks/"+tk.Ticket+"/cancel"); c.Code != http.StatusAccepted {
				w.t.Errorf("cancel: %d %s", c.Code, c.Body)
			}
			w.cancels++
		}
	}
	return w.ResponseRecorder.Write(b)
}

func (w *cancelOnTicket) call(method, path string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	req.Header.Set("Authorization", "Bearer "+alice)
	rec := httptest.NewRecorder()
	w.h.ServeHTTP(rec, req)
	return rec
}

// A cancel that arrives as soon as the ticket does — before the run has started — must leave
// the log with nothing after it but the supervisor branch's close, error{cancelled} and done
// (the contract's cancelAsk). The branch's open belongs before the 202, so it can never arrive
// after a cancel: conformance's cancel.stops-run once saw exactly that ("branch arrived after
// cancel") when its cancel won the race with the run's start.
func TestCancelBeforeTheRunStartsAddsOnlyTheEnd(t *testing.T) {
	for _, key := range []string{"", "cancel-at-once-1"} {
		t.Run("Idempotency-Key="+key, func(t *testing.T) { testCancelAtOnce(t, key) })
	}
}

func testCancelAtOnce(t *testing.T, idempotencyKey string) {
	h := newHarness(t, server.Options{})
	cid := h.conv(alice)
	h.secret("a question cancelled at once")
	body, _ := json.Marshal(map[string]string{"question": "a question cancelled at once"})
	req := httptest.NewRequest(http.MethodPost, "/ask/v1/conversations/"+cid+"/asks", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+alice)
	req.Header.Set("Content-Type", "application/json")
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	w := &cancelOnTicket{ResponseRecorder: httptest.NewRecorder(), t: t, h: h.srv.Handler()}
	h.srv.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusAccepted || w.cancels != 1 {
		t.Fatalf("createAsk %d, %d cancels; want 202 and one cancel", w.Code, w.cancels)
	}
	frames := h.events(alice, w.ticket)
	var after []string
	for _, f := range frames {
		if f.ID > w.before {
			e := decode(t, f)
			desc := e.Type
			if e.Type == "branch" {
				desc += ":" + e.State
			}
			after = append(after, desc)
		}
	}
	if got, want := strings.Join(after, " "), "branch:close error done"; got != want {
		t.Errorf("after the cancel (last_seq %d) the log took %q, want %q", w.before, got, want)
	}
	checkLifecycle(t, frames, "error")
}

// TestRunnerEmittingThroughItsCancelAddsNothingAfterTheEnd: a runner that goes on reporting
// steps as fast as it can after its run was cancelled (it does not watch its context) adds
// nothing once the end is sealed: the log ends with the supervisor's close, error{cancelled}
// and done, every step before them, done.steps counting the steps in the log. A step taken
// between the seal and the end's write was queued after the end's seqs; the store refused it,
// the run was taken for lost and its end never written: the stream hung without done (a
// mutation audit: removing emitLocked's closed check failed no test).
func TestRunnerEmittingThroughItsCancelAddsNothingAfterTheEnd(t *testing.T) {
	started := make(chan struct{}, 1)
	runner := ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		for i := 0; ; i++ {
			emit.Step(step(i))
			if i == 0 {
				started <- struct{}{}
			}
			if ctx.Err() != nil && i > 0 {
				for j := range 300 { // and on, through the end's write
					emit.Step(step(i + 1 + j))
				}
				return ask.Outcome{Answer: answer("42")}
			}
		}
	})
	h := newHarness(t, server.Options{Runner: runner, MaxEvents: 1 << 16})
	cid := h.conv(alice)
	// Forty rounds: the mutant (no closed check) slips through about one round in three.
	for round := range 40 {
		ticket := h.ask(alice, cid, "How many sev1 incidents did we have in 2026-Q2?")
		<-started
		if r := h.cancel(alice, ticket); r.StatusCode() != http.StatusAccepted {
			t.Fatalf("round %d: cancel: %d %s", round, r.StatusCode(), r.Body)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		resp := h.stream(ctx, alice, ticket, nil)
		frames := readAll(t, resp.Body)
		cancel()
		var events []frame
		for _, f := range frames {
			if f.Event != "" {
				events = append(events, f)
			}
		}
		n := len(events)
		if n < 4 || events[n-1].Event != "done" || events[n-2].Event != "error" || events[n-3].Event != "branch" {
			last := events[max(0, n-4):]
			var types []string
			for _, f := range last {
				types = append(types, f.Event)
			}
			t.Fatalf("round %d: the log ends %v, want … branch, error, done", round, types)
		}
		if e := decode(t, events[n-2]); e.Kind != "cancelled" {
			t.Errorf("round %d: error kind %q, want cancelled", round, e.Kind)
		}
		steps := int64(0)
		for _, f := range events[:n-3] {
			if f.Event == "step" {
				steps++
			}
		}
		if d := decode(t, events[n-1]); d.Steps != steps {
			t.Errorf("round %d: done.steps %d, %d steps in the log", round, d.Steps, steps)
		}
	}
}
