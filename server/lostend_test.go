package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
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
	st := replicaStoreWith(t, srv, redisstore.Options{Prefix: "lostend:" + rand.Text() + ":", Seal: sealKeys(t, seal.NewKey("k1")), Lease: time.Second})
	mid, resume := make(chan string, 1), make(chan struct{})
	histories := make(chan []ask.Turn, 4)
	runner := turnRunner(histories, mid, map[string]chan struct{}{"slow": resume})
	h := newHarness(t, server.Options{Store: st, Runner: runner})
	aof := aofOf(t, srv)

	cid := h.conv(alice)
	a := h.ask(alice, cid, "slow: how many sev1 incidents did we have in 2026-Q2?")
	within(t, mid, "ask A's first step")
	// What Redis will come back with: A's creation and first writes, not its end nor B.
	cut := aof.holds(t, a)
	close(resume)
	sawA := h.events(alice, a)
	checkLifecycle(t, sawA, gen.EventTypeAnswer)
	<-histories
	b := h.ask(alice, cid, "and how many of them were reopened?")
	sawB := h.events(alice, b)
	checkLifecycle(t, sawB, gen.EventTypeAnswer)
	<-histories

	aof.crashTo(t, cut)

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
	readsAsRead(t, h, a, sawA)
	readsAsRead(t, h, b, sawB)
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

// readsAsRead checks that ticket's log, read now, ends answer and done and holds at each seq
// the event its client read there (the steps the store lost are a gap).
func readsAsRead(t *testing.T, h *harness, ticket string, saw []frame) {
	t.Helper()
	seen := map[int64]frame{}
	for _, f := range saw {
		seen[f.ID] = f
	}
	got := h.events(alice, ticket)
	if n := len(got); n < 4 || got[n-2].Event != "answer" || got[n-1].Event != "done" || countTypes(got, "answer") != 1 {
		t.Errorf("ticket %s reads %v, want it to end answer, done", ticket, types(got))
	}
	for _, f := range got {
		if s, ok := seen[f.ID]; !ok || s.Event != f.Event || string(s.Data) != string(f.Data) {
			t.Errorf("ticket %s: seq %d reads %s %s, the client read %s %s", ticket, f.ID, f.Event, f.Data, s.Event, s.Data)
		}
	}
}

// TestRestartThatLostAnEndWhoseReplyWasLost: Redis took an ask's end (its client read the
// answer and done) but its reply to the runner was lost, and Redis then crashed and came back
// without that end. The runner, writing the end again, finds the log no longer continues its
// seqs. Before, it ended the ask error{interrupted} after done's seq: the client that had read
// answer and done read an error next, the turn interrupted. Now the runner writes the end it
// sealed again (its outcome is known), after the seqs the store kept: the ticket reads as the
// client read it, and the next ask in the conversation is given the answered turn.
func TestRestartThatLostAnEndWhoseReplyWasLost(t *testing.T) {
	srv := redistest.StartDurable(t)
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	// A read timeout longer than the test: the stalled reply ends only with Redis's crash.
	rc := goredis.NewClient(&goredis.Options{Addr: p.Addr(), ReadTimeout: time.Minute, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	opts := redisstore.Options{Prefix: "lostreply:" + rand.Text() + ":", Seal: sealKeys(t, seal.NewKey("k1")), Lease: 10 * time.Second}
	rcOpts := opts
	rcOpts.Client = rc
	st, err := redisstore.New(t.Context(), rcOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	mid, resume := make(chan string, 1), make(chan struct{})
	histories := make(chan []ask.Turn, 2)
	h := newHarness(t, server.Options{Store: st, Runner: turnRunner(histories, mid, map[string]chan struct{}{"slow": resume})})
	// The client reads from another replica, which Redis tells of the end.
	other := newHarness(t, server.Options{Store: replicaStoreWith(t, srv, opts)})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(h.logs.String())
		}
	})
	aof := aofOf(t, srv)

	// An ask answered first, so that Redis has every script: the end's EVALSHA is then run, not
	// answered NOSCRIPT (a reply that, lost, would leave nothing written).
	checkLifecycle(t, h.events(alice, h.ask(alice, h.conv(alice), "how many incidents were there?")), gen.EventTypeAnswer)
	<-histories
	cid := h.conv(alice)
	a := h.ask(alice, cid, "slow: how many sev1 incidents did we have in 2026-Q2?")
	within(t, mid, "the ask's first step")
	<-histories
	// What Redis will come back with: the ask's first writes.
	cut := aof.holds(t, a)
	p.DropReplies(1, `"type":"done"`, faultproxy.Stall) // Redis takes the end; the runner never hears
	close(resume)
	saw := other.events(alice, a) // Redis took the end
	checkLifecycle(t, saw, gen.EventTypeAnswer)
	if got := p.Stats().RepliesDropped; got != 1 {
		t.Fatalf("the proxy dropped %d replies, want the end's", got)
	}

	aof.crashTo(t, cut)
	redistest.Poll(t, "ticket "+a+" ended after the restart", func() bool {
		r := h.status(alice, a)
		return r.StatusCode() == 200 && r.JSON200 != nil && r.JSON200.State != gen.AskStateRunning
	})
	if r := h.status(alice, a); r.JSON200.State != gen.AskStateAnswer {
		t.Errorf("ticket %s reads %s after the restart, want answer as its client read", a, r.JSON200.State)
	}
	readsAsRead(t, h, a, saw)
	checkLifecycle(t, h.events(alice, h.ask(alice, cid, "and in 2026-Q3?")), gen.EventTypeAnswer)
	if hist := <-histories; len(hist) != 1 || hist[0].Outcome != gen.EventTypeAnswer {
		t.Errorf("the next ask was given %d turns, want the answered one: %+v", len(hist), hist)
	}
}

// quietStore is a Redis store whose reconnections the server does not hear of, nor its Redis's
// restarts: what the server writes again after a restart is then only what a run finding its
// own log lost asks for.
type quietStore struct {
	*redisstore.Store
	never chan struct{}
}

func (q quietStore) Reconnects() <-chan struct{} { return q.never }

func (quietStore) RestartedWithin(context.Context, time.Duration) (bool, error) { return false, nil }

// TestRestoreWaitsForEarlierEndsLost: a durable Redis came back without ask A's end (answered)
// and without ask B, asked after A in the same conversation and still running. B's runner finds
// its log gone first. Before, it restored B at once: the conversation, as Redis kept it, was
// still held by A, so B's interrupted turn was left out, and the conversation read A's answer
// alone once A's end was written again (or stayed held by A until its lease lapsed, with no
// reconnect heard). Now the run has this replica's lost ends written again first: A reads
// answered, B error{interrupted}, and the next ask is given both turns in order.
func TestRestoreWaitsForEarlierEndsLost(t *testing.T) {
	srv := redistest.StartDurable(t)
	st := replicaStoreWith(t, srv, redisstore.Options{Prefix: "order:" + rand.Text() + ":", Seal: sealKeys(t, seal.NewKey("k1")), Lease: 10 * time.Second})
	mid := make(chan string, 1)
	gates := map[string]chan struct{}{"A:": make(chan struct{}), "B:": make(chan struct{})}
	histories := make(chan []ask.Turn, 3)
	h := newHarness(t, server.Options{Store: quietStore{Store: st, never: make(chan struct{})}, Runner: turnRunner(histories, mid, gates)})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(h.logs.String())
		}
	})
	aof := aofOf(t, srv)

	cid, a, b := answeredThenRunning(t, h, h, aof, mid, histories, gates)
	close(gates["B:"]) // B's next write finds B gone
	redistest.Poll(t, "ask B restored", func() bool {
		r := h.status(alice, b)
		return r.JSON200 != nil && r.JSON200.State != gen.AskStateRunning
	})
	checkRestored(t, h.events(alice, b), 3) // accepted, open, a step: then the gap
	if r := h.status(alice, a); r.JSON200 == nil || r.JSON200.State != gen.AskStateAnswer {
		t.Errorf("A reads %d %s once B was restored, want answered", r.StatusCode(), r.Body)
	}
	c := h.ask(alice, cid, "and in 2026-Q3?")
	checkLifecycle(t, h.events(alice, c), gen.EventTypeAnswer)
	hist := <-histories
	var outs []string
	for _, tr := range hist {
		outs = append(outs, string(tr.Outcome))
	}
	if len(hist) != 2 || hist[0].Outcome != gen.EventTypeAnswer || hist[1].Outcome != gen.EventTypeError {
		t.Errorf("the next ask was given the turns %v, want A's answer and B's error", outs)
	}
}

// answeredThenRunning asks A (a question gated by "A:", see turnRunner) on ra and has it
// answered, then B ("B:") on rb in the same conversation, left running at its first step, and
// crashes Redis back to what it held at A's first step: A's end and all of B are lost.
func answeredThenRunning(t *testing.T, ra, rb *harness, aof durableAOF, mid chan string, histories chan []ask.Turn, gates map[string]chan struct{}) (cid, a, b string) {
	t.Helper()
	cid = ra.conv(alice)
	a = ra.ask(alice, cid, "A: how many sev1 incidents did we have in 2026-Q2?")
	within(t, mid, "ask A's first step")
	<-histories
	cut := aof.holds(t, a) // A's creation and first step: not its end, nor B
	close(gates["A:"])
	checkLifecycle(t, ra.events(alice, a), gen.EventTypeAnswer)
	b = rb.ask(alice, cid, "B: and how many of them were reopened?")
	within(t, mid, "ask B's first step")
	<-histories
	aof.crashTo(t, cut)
	return cid, a, b
}

// durableAOF is a durable Redis's append-only file, to bring Redis back without its last
// writes, as a crash whose fsync was postponed does.
type durableAOF struct {
	srv  *redistest.Server
	path string
}

func aofOf(t *testing.T, srv *redistest.Server) durableAOF {
	t.Helper()
	incr, err := filepath.Glob(filepath.Join(srv.Dir, "appendonlydir", "*.incr.aof"))
	if err != nil || len(incr) != 1 {
		t.Fatalf("the AOF: %v %v", incr, err)
	}
	return durableAOF{srv: srv, path: incr[0]}
}

// holds waits until the AOF holds ticket's first step (seq 3: its creation and the
// conversation's are before it), as Redis writes it there, and returns the file's size then.
func (d durableAOF) holds(t *testing.T, ticket string) int64 {
	t.Helper()
	want := []byte(`"seq":3,"ticket":"` + ticket + `"`)
	var size int64
	redistest.Poll(t, "the AOF holding "+ticket+"'s first step", func() bool {
		b, err := os.ReadFile(d.path)
		size = int64(len(b))
		return err == nil && bytes.Contains(b, want)
	})
	return size
}

// crashTo kills Redis, cuts its AOF back to size and starts Redis again on what is left.
func (d durableAOF) crashTo(t *testing.T, size int64) {
	t.Helper()
	if err := d.srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(d.path, size); err != nil {
		t.Fatal(err)
	}
	if err := d.srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// turnRunner answers "42" after two steps, telling histories each ask's history. An ask whose
// question starts with a key of gates says its ticket on mid after its first step and waits
// for that gate to close before its second.
func turnRunner(histories chan<- []ask.Turn, mid chan<- string, gates map[string]chan struct{}) ask.Runner {
	return ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		histories <- req.History
		emit.Step(step(0))
		for prefix, gate := range gates {
			if strings.HasPrefix(req.Question, prefix) {
				mid <- req.Ticket
				<-gate
			}
		}
		emit.Step(step(1))
		return ask.Outcome{Answer: answer("42")}
	})
}

// TestRestoreOnAnotherReplicaKeepsTheEarlierTurn: a durable Redis came back without ask A's end
// (answered on replica 1) and without ask B, asked after A in the same conversation on replica
// 2 and still running. B's runner restores B before anyone writes A's end (replica 1 has not
// heard of the restart here): the conversation, as Redis kept it, is held by A. Before, B's
// interrupted turn was left out for good, and the history went on from A's turn alone. Now B's
// restore leaves its turn waiting on the conversation for A's end (here the lease sweep's, A's
// replica never writing it again), which records it after A's: the next ask is given both
// turns, in order.
func TestRestoreOnAnotherReplicaKeepsTheEarlierTurn(t *testing.T) {
	srv := redistest.StartDurable(t)
	opts := redisstore.Options{Prefix: "park:" + rand.Text() + ":", Seal: sealKeys(t, seal.NewKey("k1")), Lease: 4 * time.Second}
	mid := make(chan string, 2)
	gates := map[string]chan struct{}{"A:": make(chan struct{}), "B:": make(chan struct{})}
	histories := make(chan []ask.Turn, 3)
	runner := turnRunner(histories, mid, gates)
	r1 := newHarness(t, server.Options{Store: quietStore{Store: replicaStoreWith(t, srv, opts), never: make(chan struct{})}, Runner: runner})
	r2 := newHarness(t, server.Options{Store: replicaStoreWith(t, srv, opts), Runner: runner})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("replica 1:", r1.logs.String())
			t.Log("replica 2:", r2.logs.String())
		}
	})
	aof := aofOf(t, srv)

	cid, a, b := answeredThenRunning(t, r1, r2, aof, mid, histories, gates)
	close(gates["B:"])                  // B's next write finds B gone: replica 2 restores it
	for _, tk := range []string{b, a} { // B restored at once; A once its lease lapses
		redistest.Poll(t, "ask "+tk+" ended after the restart", func() bool {
			r := r2.status(alice, tk)
			return r.JSON200 != nil && r.JSON200.State != gen.AskStateRunning
		})
	}
	checkRestored(t, r2.events(alice, b), 3)
	c := r2.ask(alice, cid, "and in 2026-Q3?")
	checkLifecycle(t, r2.events(alice, c), gen.EventTypeAnswer)
	hist := <-histories
	var got []string
	for _, tr := range hist {
		got = append(got, tr.Question[:2]+string(tr.Outcome))
	}
	if len(hist) != 2 || !strings.HasPrefix(hist[0].Question, "A:") || !strings.HasPrefix(hist[1].Question, "B:") || hist[1].Outcome != gen.EventTypeError {
		t.Errorf("the next ask was given the turns %v, want A's, then B's error", got)
	}
}

// TestRestartThatLostAKeyedCreateAnswersItsRetry: an ask made under an Idempotency-Key and
// answered, all of it (the ticket, its end and the key's record) in the second a durable Redis
// lost. The replica writes the end again (re-creating the ticket), and, before, a retry with
// the key, the record gone, created another ticket and ran the question again. Now the replica
// writes the key's record again too: the retry is answered the first 202, replayed.
func TestRestartThatLostAKeyedCreateAnswersItsRetry(t *testing.T) {
	srv := redistest.StartDurable(t)
	st := replicaStoreWith(t, srv, redisstore.Options{Prefix: "lostkey:" + rand.Text() + ":", Seal: sealKeys(t, seal.NewKey("k1")), Lease: time.Second})
	h := newHarness(t, server.Options{Store: st})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(h.logs.String())
		}
	})
	aof := aofOf(t, srv)

	cid := h.conv(alice)
	var cut int64
	redistest.Poll(t, "the AOF holding the conversation", func() bool {
		b, err := os.ReadFile(aof.path)
		cut = int64(len(b))
		return err == nil && bytes.Contains(b, []byte(cid))
	})
	const q = "how many sev1 incidents did we have in 2026-Q2?"
	h.secret(q)
	key := "retry-" + rand.Text()
	create := func() *gen.CreateAskResponse {
		t.Helper()
		r, err := h.cw.CreateAskWithResponse(t.Context(), cid, &gen.CreateAskParams{IdempotencyKey: &key}, gen.AskRequest{Question: q}, bearer(alice))
		if err != nil {
			t.Fatal(err)
		}
		if r.StatusCode() != 202 || r.JSON202 == nil {
			t.Fatalf("create with the key: %d %s", r.StatusCode(), r.Body)
		}
		return r
	}
	first := create()
	began := time.Now() // the record's first use came before the 202 came back
	a := first.JSON202.Ticket
	checkLifecycle(t, h.events(alice, a), gen.EventTypeAnswer)

	aof.crashTo(t, cut)
	redistest.Poll(t, "ticket "+a+" answered after the restart", func() bool {
		r := h.status(alice, a)
		return r.JSON200 != nil && r.JSON200.State == gen.AskStateAnswer
	})
	again := create()
	if again.JSON202.Ticket != a || !bytes.Equal(again.Body, first.Body) || again.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the retry with the key answered ticket %s (replayed %q), want the first 202, %s, replayed", again.JSON202.Ticket, again.HTTPResponse.Header.Get("Idempotent-Replayed"), a)
	}
	// The record written again expires when the lost one would have, DAS_ASK_TTL_S after the
	// key's first use, not a whole TTL after it was written again.
	rc := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	defer rc.Close()
	recs, err := rc.Keys(t.Context(), "*idem:*"+key).Result()
	if err != nil || len(recs) != 1 {
		t.Fatalf("the key's record: %v, %v; want one", recs, err)
	}
	pttl, err := rc.PTTL(t.Context(), recs[0]).Result()
	if latest := time.Until(began.Add(server.DefaultTTL)); err != nil || pttl > latest+25*time.Millisecond {
		// The slack is for the rewrite's own round trip, which a loaded machine can stretch
		// (the record is written with the time left when it is sent); a whole TTL from the
		// rewrite overshoots by the restart's time at the least, over 100 ms here.
		t.Errorf("the record written again expires in %v (%v), want no later than its first use's TTL, in %v", pttl, err, latest)
	}
}
