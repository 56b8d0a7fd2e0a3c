package server_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/faultproxy"
	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/seal"
)

// TestReplicaDyingWithRedisReusesNoSeq: replica A runs asks X and Y, and dies with a durable
// Redis that comes back without their last steps (seqs 4–6, which clients had read). X's
// client reads through replica B and stays connected; Y's read through A, and resumes on B with
// Last-Event-ID: 6. B's lease sweep ends both runs. Before, it ended each after the last seq
// Redis kept (3): the supervisor's close, error{interrupted} and done at 4–6, seqs the clients
// had read as steps, and neither client was given a terminal (X's stream closed at its cursor,
// Y's resume answered 400 or nothing). Now B's tail hub raises X's floor to what it had read,
// and Y's resume raises Y's floor to its cursor: each run ends after 6, each client is given
// error{interrupted} and done after the step it had read, and a full read shows the lost steps
// as a gap.
func TestReplicaDyingWithRedisReusesNoSeq(t *testing.T) {
	srv := redistest.StartDurable(t)
	opts := redisstore.Options{Prefix: "floor:" + rand.Text() + ":", Seal: sealKeys(t, seal.NewKey("k1")), Lease: 3 * time.Second}

	// A reaches Redis through a proxy, cut to make A die.
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	rc := goredis.NewClient(&goredis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rc.Close() })
	aOpts := opts
	aOpts.Client = rc
	stA, err := redisstore.New(t.Context(), aOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stA.Close() })
	mid, more, gate := make(chan string, 2), make(chan string, 2), make(chan struct{})
	a := newHarness(t, server.Options{Store: stA, Runner: ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		emit.Step(step(0)) // seq 3
		mid <- req.Ticket
		<-gate
		for i := 1; i <= 3; i++ { // seqs 4–6
			emit.Step(step(i))
		}
		more <- req.Ticket
		<-ctx.Done() // until the run is ended elsewhere, or the replica goes
		return ask.Outcome{Answer: answer("42")}
	})})
	t.Cleanup(p.Pass) // before A's shutdown (cleanups run last first): A may then hear X and Y ended
	b := newHarness(t, server.Options{Store: replicaStoreWith(t, srv, opts)})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("A:", a.logs.String())
			t.Log("B:", b.logs.String())
		}
	})
	aof := aofOf(t, srv)

	x := a.ask(alice, a.conv(alice), "how many sev1 incidents did we have in 2026-Q2?")
	y := a.ask(alice, a.conv(alice), "and how many of them were reopened?")
	within(t, mid, "an ask's first step")
	within(t, mid, "the other ask's first step")
	aof.holds(t, x)
	cut := aof.holds(t, y) // what Redis will come back with: up to each ask's first step
	close(gate)
	within(t, more, "an ask's steps 4–6")
	within(t, more, "the other ask's steps 4–6")

	xs := newFrames(b.stream(t.Context(), alice, x, nil)) // X's client, on B: stays connected
	readTo(t, xs, 6)
	yctx, ycancel := context.WithCancel(t.Context())
	readTo(t, newFrames(a.stream(yctx, alice, y, nil)), 6) // Y's client, on A: goes with A
	ycancel()

	p.Refuse() // A dies: it reaches Redis no more
	aof.crashTo(t, cut)

	last := "6"
	resp := b.stream(t.Context(), alice, y, &gen.StreamEventsParams{LastEventID: &last})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Y's resume on B with Last-Event-ID: 6 answered %d %s", resp.StatusCode, readBody(t, resp))
	}
	checkEndAfter(t, "Y's resume", readAll(t, resp.Body), 6)
	checkEndAfter(t, "X's stream", readAll(t, xs.br), 6)
	for _, tk := range []string{x, y} {
		checkRestored(t, b.events(alice, tk), 6) // accepted, open, step 0, the gap, the end
		if r := b.status(alice, tk); r.JSON200 == nil || r.JSON200.State != gen.AskStateError {
			t.Errorf("ticket %s reads %d %s, want error", tk, r.StatusCode(), r.Body)
		}
	}
}

// readTo reads fr's events up to seq, which must come in order.
func readTo(t *testing.T, fr *frameReader, seq int64) {
	t.Helper()
	for {
		f := fr.next(t)
		if f.ID == seq {
			return
		}
		if f.ID > seq || f.Event == "done" {
			t.Fatalf("the stream went past %d without it: %s at %d", seq, f.Event, f.ID)
		}
	}
}

// checkEndAfter checks that what a client read after cursor is the end of an interrupted run
// (the supervisor's close, error{interrupted}, done) at seqs past cursor, each once.
func checkEndAfter(t *testing.T, what string, frames []frame, cursor int64) {
	t.Helper()
	if len(frames) != 3 || frames[0].Event != "branch" || frames[1].Event != "error" || frames[2].Event != "done" {
		t.Fatalf("%s read %v after %d, want branch, error, done", what, types(frames), cursor)
	}
	for i, f := range frames {
		if f.ID != cursor+int64(i)+1 {
			t.Errorf("%s read %s at seq %d, want %d", what, f.Event, f.ID, cursor+int64(i)+1)
		}
	}
	if e := decode(t, frames[1]); e.Kind != string(gen.ErrorKindInterrupted) {
		t.Errorf("%s read error{%s}, want interrupted", what, e.Kind)
	}
}
