package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/seal"
)

// historyRunner answers, reporting how many prior turns each ask was given.
func historyRunner(turns chan<- int) ask.Runner {
	return ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		turns <- len(req.History)
		emit.Step(step(0))
		return ask.Outcome{Answer: answer("42")}
	})
}

// TestDurableModeSealsAndSurvivesRestart: Redis with an AOF (appendfsync everysec), the store
// sealing with an operator key. No file Redis writes (the AOF, an RDB snapshot) holds the
// question text readable; after SIGKILL and a restart on the same AOF no ticket has vanished,
// the conversation still remembers its turns, and an ask running across the crash still ends
// with one terminal and done.
func TestDurableModeSealsAndSurvivesRestart(t *testing.T) {
	srv := redistest.StartDurable(t)
	keys, err := seal.ParseKeys(seal.NewKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	prefix := "durable:" + rand.Text() + ":"
	st, err := redisstore.New(t.Context(), redisstore.Options{URL: srv.URL, Prefix: prefix, Seal: keys, Lease: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	turns := make(chan int, 4)
	h := newHarness(t, server.Options{Store: st, Runner: historyRunner(turns)})

	questions := []string{
		"How many sev1 incidents did the payments team have in 2026-Q2?",
		"And which of them breached the four-hour resolution target?",
	}
	cid := h.conv(alice)
	var tickets []string
	for i, q := range questions {
		tk := h.ask(alice, cid, q)
		checkLifecycle(t, h.events(alice, tk), gen.EventTypeAnswer)
		if got := <-turns; got != i {
			t.Fatalf("ask %d was given %d prior turns, want %d", i+1, got, i)
		}
		tickets = append(tickets, tk)
	}
	// Everything written so far on disk, without waiting for Redis's next fsync: with
	// appendfsync always, the reply to a write comes after the AOF holds it and all before it
	// (the AOF is one sequence); then an RDB snapshot too, beside the AOF (SAVE returns once it
	// is written).
	rc := raw(t, srv)
	if err := rc.ConfigSet(t.Context(), "appendfsync", "always").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Set(t.Context(), prefix+"fence", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.ConfigSet(t.Context(), "appendfsync", "everysec").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Save(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(srv.Dir, "dump.rdb")); err != nil {
		t.Fatalf("no RDB after SAVE: %v", err)
	}
	disk := redistest.Files(t, srv.Dir)
	if !bytes.Contains(disk, []byte(tickets[1])) {
		t.Fatal("the files Redis wrote do not hold the asks: not the ones the store wrote to")
	}
	for _, q := range questions {
		for _, needle := range []string{q, q[:24], "payments team", "four-hour"} {
			if bytes.Contains(disk, []byte(needle)) {
				t.Errorf("a file Redis wrote holds %q readable", needle)
			}
		}
	}
	if !bytes.Contains(disk, []byte("sealed:v1:k1:")) {
		t.Error("no sealed value on disk: the files checked are not the ones the store wrote")
	}

	// An ask in flight across the crash: it waits for the go-ahead between two steps.
	mid, resume, ended := make(chan string, 1), make(chan struct{}), make(chan string, 1)
	h2 := newHarness(t, server.Options{Store: st, Runner: phasedRunner(1, 2, mid, resume),
		Hooks: server.Hooks{Ended: func(ticket string, _ server.End) { ended <- ticket }}})
	cid2 := h2.conv(alice)
	running := h2.ask(alice, cid2, "How many sev2 incidents were reopened in 2026-Q2?")
	within(t, mid, "the run in flight")
	// Redis usually writes the AOF before it replies, so a SIGKILL mostly loses nothing
	// acknowledged; but with appendfsync everysec it postpones that write (up to 2 s) while a
	// background fsync is slow, so on a busy disk the run's last writes may be lost with the
	// process. Either way the run ends in one of two documented shapes, checked below.

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(resume)

	for _, tk := range tickets {
		r := h.status(alice, tk)
		if r.StatusCode() != 200 || r.JSON200 == nil || r.JSON200.State != gen.AskStateAnswer {
			t.Errorf("ticket %s after the restart: %d %s, want it answered as before", tk, r.StatusCode(), r.Body)
		}
	}
	// The crash may have taken the ticket itself (its creation not yet in the AOF): then it is
	// unknown until its runner, at its next write, finds it gone and restores it. The log is
	// read once the run has ended, in whichever shape.
	within(t, ended, "the run's end after the restart")
	frames := h2.events(alice, running)
	if countTypes(frames, "step") == 3 {
		// Nothing was lost: the run wrote on after the restart and answered.
		_, done := checkLifecycle(t, frames, gen.EventTypeAnswer)
		if done.Steps != 3 {
			t.Errorf("done.steps = %d, want the 3 steps in the log", done.Steps)
		}
	} else {
		// The crash took the log's tail: the log was restored and ended error{interrupted} +
		// done after every seq the run had assigned, the supervisor branch closed, the gap
		// reported by done.steps (steps made, not steps carried).
		// accepted, the branch's open, a milestone and a step were assigned seqs 1–4 before
		// the crash, so the restored close, error and done come after them.
		checkRestored(t, frames, 4)
	}
	// The conversation still remembers both turns, opened with the key.
	tk := h.ask(alice, cid, "And in 2026-Q3?")
	checkLifecycle(t, h.events(alice, tk), gen.EventTypeAnswer)
	if got := <-turns; got != 2 {
		t.Errorf("after the restart the conversation gave %d prior turns, want 2", got)
	}

	// Without its key, what it sealed is gone (crypto-shredded): the ticket reads as unknown.
	other, err := seal.ParseKeys(seal.NewKey("k2"))
	if err != nil {
		t.Fatal(err)
	}
	shredded, err := redisstore.New(t.Context(), redisstore.Options{URL: srv.URL, Prefix: prefix, Seal: other})
	if err != nil {
		t.Fatal(err)
	}
	defer shredded.Close()
	if _, err := shredded.Read(t.Context(), tickets[0], 0); err == nil {
		t.Error("a ticket sealed with a dropped key was read")
	}
}

// TestRestartLosesEverything: Redis in the memory-only mode restarts (SIGKILL: every key is
// gone) while an ask runs. The runner finds its ticket gone, and restores it ended
// error{interrupted} + done after every seq it had assigned: the ticket a client holds does
// not vanish (it reads as interrupted, not as unknown), and no seq a client saw is reused.
func TestRestartLosesEverything(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "wiped:" + rand.Text() + ":"
	st, err := redisstore.New(t.Context(), redisstore.Options{URL: srv.URL, Prefix: prefix, Lease: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	mid, resume := make(chan string, 1), make(chan struct{})
	h := newHarness(t, server.Options{Store: st, Runner: phasedRunner(2, 2, mid, resume)})
	old := newHarness(t, server.Options{Store: st})
	oldConv := old.conv(alice)
	finished := old.ask(alice, oldConv, "How many sev2 incidents did we have in 2026-Q2?")
	checkLifecycle(t, old.events(alice, finished), gen.EventTypeAnswer)
	ticket := h.ask(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	within(t, mid, "the run's first steps")
	seen := h.status(alice, ticket).JSON200.LastSeq // accepted, open, milestone, 2 steps
	// A stream open across the restart: it ends with the restored end, not with nothing.
	live := make(chan []frame, 1)
	resp := h.stream(t.Context(), alice, ticket, nil)
	go func() {
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		var got []frame
		for {
			f, err := readFrame(br)
			if err != nil { // the end of the stream, or a failure the checks below report
				live <- got
				return
			}
			if f.Event != "" {
				got = append(got, f)
			}
		}
	}()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(resume)
	// The event awaited: the stream open across the restart ends, with the restored end.
	var got []frame
	select {
	case got = <-live:
	case <-time.After(20 * time.Second):
		t.Fatal("the stream open across the restart did not end within 20s")
	}
	if len(got) < 3 || got[len(got)-1].Event != "done" || got[len(got)-2].Event != "error" {
		t.Errorf("the stream open across the restart read %v, want it to end with error, done", types(got))
	}
	r := h.status(alice, ticket)
	if r.StatusCode() != http.StatusOK || r.JSON200 == nil || r.JSON200.State != gen.AskStateError {
		t.Fatalf("the lost ticket after its end: %d %s, want state error", r.StatusCode(), r.Body)
	}
	st2 := r.JSON200
	resp = h.stream(t.Context(), alice, ticket, nil)
	frames := readAll(t, resp.Body)
	_ = resp.Body.Close()
	// Re-created from what was admitted (accepted and the supervisor branch's open), then the
	// restored end: the branch it closes is one the log opens.
	if len(frames) != 5 || frames[0].Event != "accepted" || frames[1].Event != "branch" || frames[2].Event != "branch" ||
		frames[3].Event != "error" || frames[4].Event != "done" {
		t.Fatalf("restored log %v, want accepted, branch (open), branch (close), error, done", types(frames))
	}
	if e := decode(t, frames[1]); e.Seq != 2 || e.Role != "supervisor" || e.State != "open" {
		t.Errorf("restored seq %d %s/%s, want seq 2, the supervisor branch's open", e.Seq, e.Role, e.State)
	}
	checkRestored(t, frames, seen)
	if e := decode(t, frames[3]); e.Kind != string(gen.ErrorKindInterrupted) || e.Seq <= seen {
		t.Errorf("terminal %s at seq %d, want interrupted after seq %d (the last the client saw)", e.Kind, e.Seq, seen)
	}
	// A finished ticket and a conversation the restart lost are gone, and say so: not the
	// answer for someone else's.
	lost := func(what string, status int, body []byte) {
		t.Helper()
		p := problemOf(t, status, "application/problem+json", body, http.StatusNotFound)
		if p.Detail == nil || !strings.HasPrefix(*p.Detail, "lost") {
			t.Errorf("%s after the restart: %v, want it reported lost", what, p.Detail)
		}
	}
	for _, tok := range []string{alice, bob} {
		r := old.status(tok, finished)
		lost("a finished ticket", r.StatusCode(), r.Body)
	}
	ra := old.askRaw(alice, oldConv, "And in 2026-Q3?")
	lost("a conversation", ra.StatusCode(), ra.Body)
	other := old.ask(alice, old.conv(alice), "And in 2026-Q4?")
	if r := old.status(bob, other); r.StatusCode() != http.StatusNotFound || strings.Contains(string(r.Body), "lost") {
		t.Errorf("someone else's ticket: %d %s, want the plain 404", r.StatusCode(), r.Body)
	}

	// The conversation is free again for the next ask.
	if r := h.askRaw(alice, st2.ConversationId, "And in 2026-Q3?"); r.StatusCode() != http.StatusAccepted {
		t.Errorf("the next ask in the restored conversation: %d %s", r.StatusCode(), r.Body)
	}
}
