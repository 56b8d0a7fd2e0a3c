package server_test

import (
	"context"
	"crypto/rand"
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

// TestRestartThatLostEndsWritesThemAgain: a durable Redis (AOF, everysec) that comes back
// without its last writes, as one whose fsync was postponed does after a crash, lost the end of
// ask A (answered, its client had read the answer) and all of ask B, asked after it in the
// same conversation and answered too. Both runs had ended on a live replica. Before, the lease
// sweep ended A again, error{interrupted} at seqs its client had read with other events, its
// turn interrupted, and B read 404 for good, its turn missing. Now the replica writes both
// ends again once its store reconnects: A and B read as answered, every seq of their logs as
// the client read it (the lost steps a gap), and the next ask is given both turns, answered.
func TestRestartThatLostEndsWritesThemAgain(t *testing.T) {
	srv := redistest.StartDurable(t)
	keys, err := seal.ParseKeys(seal.NewKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := redisstore.New(t.Context(), redisstore.Options{URL: srv.URL, Prefix: "lostend:" + rand.Text() + ":", Seal: keys, Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	mid, resume := make(chan string, 1), make(chan struct{})
	histories := make(chan []ask.Turn, 4)
	runner := ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		histories <- req.History
		emit.Step(step(0))
		if strings.HasPrefix(req.Question, "slow") {
			mid <- req.Ticket
			<-resume
		}
		emit.Step(step(1))
		return ask.Outcome{Answer: answer("42")}
	})
	h := newHarness(t, server.Options{Store: st, Runner: runner})
	incr, err := filepath.Glob(filepath.Join(srv.Dir, "appendonlydir", "*.incr.aof"))
	if err != nil || len(incr) != 1 {
		t.Fatalf("the AOF: %v %v", incr, err)
	}

	cid := h.conv(alice)
	a := h.ask(alice, cid, "slow: how many sev1 incidents did we have in 2026-Q2?")
	within(t, mid, "ask A's first step")
	// What Redis will come back with: A's creation and first writes, not its end nor B.
	cut, err := os.Stat(incr[0])
	if err != nil {
		t.Fatal(err)
	}
	close(resume)
	sawA := h.events(alice, a)
	checkLifecycle(t, sawA, gen.EventTypeAnswer)
	<-histories
	b := h.ask(alice, cid, "and how many of them were reopened?")
	sawB := h.events(alice, b)
	checkLifecycle(t, sawB, gen.EventTypeAnswer)
	<-histories

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(incr[0], cut.Size()); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() {
		if t.Failed() {
			t.Log(h.logs.String())
		}
	})
	for _, tk := range []string{a, b} {
		redistest.Poll(t, "ticket "+tk+" answered after the restart", func() bool {
			r := h.status(alice, tk)
			return r.StatusCode() == 200 && r.JSON200 != nil && r.JSON200.State == gen.AskStateAnswer
		})
	}
	for _, c := range []struct {
		ticket string
		saw    []frame
	}{{a, sawA}, {b, sawB}} {
		seen := map[int64]frame{}
		for _, f := range c.saw {
			seen[f.ID] = f
		}
		// The steps the store lost are a gap; what it holds is what the client read, the
		// answer and done last.
		got := h.events(alice, c.ticket)
		if n := len(got); n < 4 || got[n-2].Event != "answer" || got[n-1].Event != "done" || countTypes(got, "answer") != 1 {
			t.Errorf("ticket %s reads %v, want it to end answer, done", c.ticket, types(got))
		}
		for _, f := range got {
			if s, ok := seen[f.ID]; !ok || s.Event != f.Event || string(s.Data) != string(f.Data) {
				t.Errorf("ticket %s: seq %d reads %s %s, the client read %s %s", c.ticket, f.ID, f.Event, f.Data, s.Event, s.Data)
			}
		}
	}
	c := h.ask(alice, cid, "and in 2026-Q3?")
	checkLifecycle(t, h.events(alice, c), gen.EventTypeAnswer)
	hist := <-histories
	if len(hist) != 2 || hist[0].Outcome != gen.EventTypeAnswer || hist[1].Outcome != gen.EventTypeAnswer {
		var outs []string
		for _, tr := range hist {
			outs = append(outs, string(tr.Outcome))
		}
		t.Errorf("the next ask was given %d turns %v, want A's and B's answers", len(hist), outs)
	}
}
