package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/store/redis/redistest"
)

// pausingRunner emits a milestone and a step, says so on mid and waits for the first resume;
// emits two steps, says so again and waits for the second; then emits a step and answers.
func pausingRunner(mid chan<- string, resume ...<-chan struct{}) ask.Runner {
	return ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseGrounding, Subject: "incident", Source: "demo"})
		emit.Step(step(0))
		mid <- req.Ticket
		<-resume[0]
		emit.Step(step(1))
		emit.Step(step(2))
		mid <- req.Ticket
		<-resume[1]
		emit.Step(step(3))
		return ask.Outcome{Answer: answer("ok")}
	})
}

// readUntil reads frames from br until one with seq at least seq; it fails the test if the
// stream ends first.
func readUntil(t *testing.T, br *bufio.Reader, seq int64) {
	t.Helper()
	for {
		f, err := readFrame(br)
		if err != nil {
			t.Fatalf("the stream ended before seq %d: %v", seq, err)
		}
		if f.ID >= seq {
			return
		}
	}
}

// TestReconnectWhileALostTailIsRestored: Redis loses the last writes of a running ask (a
// restart whose AOF lost its last second, a failover to a replica that had not caught up:
// here the ticket's keys are put back as they were two events earlier, which is what such a
// loss leaves), after a reader saw those events. The reader reconnects with the Last-Event-ID
// it holds before the ask's runner has noticed; its cursor is then beyond the last seq the store
// has. The runner restores the log ended error{interrupted} after every seq it assigned
// (store.Shared.Restore), so the reconnect must get that end, as a reconnect to a ticket lost
// whole does (TestReconnectWhileARunningAskIsRestored), not a final 400 "beyond the last
// event": the clients stop at a 400, and never learnt how the ask ended.
func TestReconnectWhileALostTailIsRestored(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "losttail:" + rand.Text() + ":"
	const seen = 6 // the last seq the reader is sent before the loss
	mid := make(chan string, 1)
	first, second := make(chan struct{}), make(chan struct{})
	var once1, once2 sync.Once
	resume1 := func() { once1.Do(func() { close(first) }) }
	resume := func() { once2.Do(func() { close(second) }) }
	t.Cleanup(func() { resume1(); resume() }) // a failing test lets the run end, so the harness can shut down
	st, p := proxiedStore(t, srv, prefix, time.Minute)
	a := newHarness(t, server.Options{Store: st, Runner: pausingRunner(mid, first, second)})
	// says when a read finds the ticket running with its log short of what the reader saw
	bs := &ticketSignal{Store: replicaStore(t, srv, prefix, time.Minute), seen: make(chan struct{}, 1),
		when: func(t store.Ticket, err error) bool { return err == nil && t.Done == nil && t.LastSeq < seen }}
	b := newHarness(t, server.Options{Store: bs})
	ticket := a.ask(alice, a.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	within(t, mid, "the run's first step")

	// A reader on replica B follows the log; once it has the first step (accepted, branch,
	// milestone, step: seq 4) the ticket's keys are taken as a loss will put them back.
	reading, stop := context.WithCancel(t.Context())
	resp := b.stream(reading, alice, ticket, nil)
	br := bufio.NewReader(resp.Body)
	readUntil(t, br, 4)
	rc := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rc.Close() })
	keys := []string{"{" + prefix + "b0}t:" + ticket, "{" + prefix + "b0}t:" + ticket + ":log", "{" + prefix + "b0}t:" + ticket + ":steps"}
	dumps := make([]string, len(keys))
	for i, k := range keys {
		d, err := rc.Dump(t.Context(), k).Result()
		if err != nil && !errors.Is(err, goredis.Nil) {
			t.Fatal(err)
		}
		dumps[i] = d
	}
	if dumps[0] == "" || dumps[1] == "" {
		t.Fatalf("the ticket's keys %v are not where the test looks", keys[:2])
	}

	// Two more steps, which the reader sees (seq 6); then the store loses them.
	resume1()
	within(t, mid, "the run's next steps")
	readUntil(t, br, 6)
	stop()
	_, _ = io.Copy(io.Discard, resp.Body)
	p.Refuse() // the runner's replica cannot notice yet
	t.Cleanup(p.Pass)
	for i, k := range keys {
		if dumps[i] == "" {
			rc.Del(t.Context(), k)
			continue
		}
		if err := rc.RestoreReplace(t.Context(), k, 0, dumps[i]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if r := b.status(alice, ticket); r.JSON200 == nil || r.JSON200.LastSeq >= seen {
		t.Fatalf("after the loss the store has last seq %v, want below %d", r.JSON200, seen)
	}
	select {
	case <-bs.seen: // that status's own read
	default:
	}

	got := b.reconnect(t, ticket, seen)
	select {
	case <-bs.seen: // the reconnect read the ticket short of its cursor
	case r := <-got:
		t.Fatalf("the reconnect answered before the ticket was restored: %d %s", r.status, r.body)
	case <-time.After(10 * time.Second):
		t.Fatal("the reconnect did not read the ticket within 10s")
	}
	// The runner's replica reaches Redis again; its next write finds the log short of its
	// own and restores it, ended.
	p.Pass()
	resume()
	var r streamResult
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the reconnected stream did not end within 20s")
	}
	if r.status != http.StatusOK {
		t.Fatalf("a stream reconnecting at seq %d while the ask's lost tail was being restored: %d %s, want the restored end", seen, r.status, r.body)
	}
	frames := readAll(t, bytes.NewReader(r.body))
	if n := len(frames); n < 2 || frames[n-2].Event != "error" || frames[n-1].Event != "done" {
		t.Fatalf("the reconnected stream read %v, want it to end error, done", types(frames))
	}
	if e := decode(t, frames[len(frames)-2]); e.Kind != string(gen.ErrorKindInterrupted) || e.Seq <= seen {
		t.Errorf("terminal %s at seq %d, want interrupted after seq %d (the last the reader saw)", e.Kind, e.Seq, seen)
	}
}
