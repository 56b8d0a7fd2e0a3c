package server_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// frozenOnEnd is a replica's store whose runs hear of their ticket's end (the store's end
// notification reaches it) but act on it only once released: a runner frozen (SIGSTOP, a long
// pause) while another replica ends its ticket.
type frozenOnEnd struct {
	*redisstore.Store
	heard   chan struct{}
	release chan struct{}
	wg      sync.WaitGroup
}

func (h *frozenOnEnd) NotifyFinished(ctx context.Context, ticket string, f func()) (bool, func() bool, error) {
	return h.Store.NotifyFinished(ctx, ticket, func() {
		select {
		case h.heard <- struct{}{}:
		default:
		}
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			<-h.release
			f()
		}()
	})
}

// TestRunEndedElsewhereThenLostIsNotRestored: a run whose ticket another replica ended (a
// cancel sent there) and which the store then lost whole (Redis restarted without persistence)
// before the runner acted on the end, is not restored by its runner. Before, the runner found
// its ticket gone and re-created it ended error{interrupted} after the seqs it had assigned
// itself, which were the seqs the cancel's end had taken: a client that had read
// error{cancelled} and done at 5–7 found branch, error{interrupted} and done there instead
// (found from outside: three askd replicas through nginx, the runner SIGSTOPped, a cancel
// through another replica, redis-server SIGKILLed and started again, the runner SIGCONTed).
func TestRunEndedElsewhereThenLostIsNotRestored(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "endedlost:" + rand.Text() + ":"
	lease := 30 * time.Second // no renewal within the test: the run learns of the end by its watch
	held := &frozenOnEnd{Store: replicaStore(t, srv, prefix, lease), heard: make(chan struct{}, 1), release: make(chan struct{})}
	var once sync.Once
	free := func() { once.Do(func() { close(held.release) }) }
	t.Cleanup(func() { free(); held.wg.Wait() })
	started, stopped := make(chan string, 1), make(chan string, 1)
	ended := make(chan server.End, 4)
	a := newHarness(t, server.Options{Store: held, Runner: blockingRunner(started, stopped),
		Hooks: server.Hooks{Ended: func(_ string, e server.End) { ended <- e }}})
	b := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, lease)})

	ticket := a.ask(alice, a.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	within(t, started, "the run's start")
	if r := b.cancel(alice, ticket); r.StatusCode() != http.StatusAccepted {
		t.Fatalf("cancel through the other replica: %d %s", r.StatusCode(), r.Body)
	}
	seen := b.events(alice, ticket) // what a client read: …, error{cancelled}, done
	select {
	case <-held.heard:
	case <-time.After(10 * time.Second):
		t.Fatal("the runner's store did not hear the end within 10s")
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	free() // the runner acts on the end only now, the store having lost the ticket

	select {
	case e := <-ended:
		if e.Restored || e.Outcome != "" {
			t.Errorf("the runner's end %+v, want none of its own (ended elsewhere): the ticket had ended", e)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not stop within 20s of the store's return")
	}
	within(t, stopped, "the run's context ending")
	// The ticket is what the memory-only store's restart left of a finished ticket: gone. Read
	// again, it must never hold other events at the seqs the client was sent.
	r := b.status(alice, ticket)
	if r.StatusCode() == http.StatusOK {
		frames := b.events(alice, ticket)
		t.Errorf("the ticket read again after the restart: %v (seq %d last); the client had read %v, last seq %d",
			types(frames), decode(t, frames[len(frames)-1]).Seq, types(seen), decode(t, seen[len(seen)-1]).Seq)
	} else if r.StatusCode() != http.StatusNotFound {
		t.Errorf("status after the restart: %d %s, want 404 (lost)", r.StatusCode(), r.Body)
	}
}
