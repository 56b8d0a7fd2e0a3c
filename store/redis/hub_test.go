package redis_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/seal"
	"github.com/das-ask/ask/store/storetest"
)

// calls is how often Redis ran cmd (lower case, e.g. "xrange"), from INFO commandstats.
func calls(t *testing.T, rc *goredis.Client, cmd string) int {
	t.Helper()
	info, err := rc.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
		return n
	}
	return 0
}

// follow reads ticket from after on, as the SSE loop does, until done or ctx ends, and
// returns the seqs it got.
func follow(ctx context.Context, s store.Store, ticket string, after int64, got func(store.Event)) error {
	for {
		b, err := s.Read(ctx, ticket, after)
		if err != nil {
			return err
		}
		for _, ev := range b.Events {
			if ev.Seq <= after {
				return fmt.Errorf("seq %d after %d: a duplicate or out of order", ev.Seq, after)
			}
			after = ev.Seq
			got(ev)
		}
		if b.Finished {
			return nil
		}
		select {
		case <-b.Changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func newTicket(t *testing.T, s store.Store, id string) {
	t.Helper()
	storetest.MustConv(t, s, "c-"+id, storetest.Alice)
	if _, err := storetest.NewTicket(t, s, id, "c-"+id, storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
}

// TestHubOneReadPerChange: many readers of one ticket on one instance (replica) get every
// event exactly once and in order while the writer, on another, appends, and Redis runs
// exactly one XRANGE per change for all of them (plus the first read), not one per reader.
func TestHubOneReadPerChange(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	w := newStore(t, srv, redisstore.Options{Prefix: "one:", Replica: "w"})
	s := newStore(t, srv, redisstore.Options{Prefix: "one:", Replica: "r"})
	oneReadPerChange(t, w, s, func() int { return calls(t, rc, "xrange") })
}

// TestHubOneReadPerChangeCluster: the same on a three-primary Redis Cluster (the change
// channel reaches the subscriber whichever node it is on; XRANGE counted over every node).
func TestHubOneReadPerChangeCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t, 3, 0)
	url := "redis+cluster://" + strings.Join(c.Addrs(), ",")
	open := func(replica string) *redisstore.Store {
		s, err := redisstore.New(t.Context(), redisstore.Options{URL: url, Prefix: "onec:", Replica: replica})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	var nodes []*goredis.Client
	for _, addr := range c.Addrs() {
		n := goredis.NewClient(&goredis.Options{Addr: addr})
		t.Cleanup(func() { _ = n.Close() })
		nodes = append(nodes, n)
	}
	oneReadPerChange(t, open("w"), open("r"), func() int {
		sum := 0
		for _, n := range nodes {
			sum += calls(t, n, "xrange")
		}
		return sum
	})
}

// oneReadPerChange has 20 readers on s follow a ticket w writes, and checks each gets every
// event once and in order, with exactly one XRANGE (xranges counts them) per change for all.
func oneReadPerChange(t *testing.T, w, s *redisstore.Store, xranges func() int) {
	ctx := t.Context()
	newTicket(t, w, "t")
	const readers, appends = 20, 60

	before := xranges()
	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	seen := make([]int64, readers) // the last seq each reader got
	errs := make(chan error, readers)
	for i := range readers {
		go func() {
			errs <- follow(ctx, s, "t", 0, func(ev store.Event) {
				mu.Lock()
				if want := seen[i] + 1; ev.Seq != want {
					errs <- fmt.Errorf("reader %d got seq %d, want %d", i, ev.Seq, want)
				}
				seen[i] = ev.Seq
				cond.Broadcast()
				mu.Unlock()
			})
		}()
	}
	// Each change waits until every reader has what came before, so that no two changes
	// can share one read: the count is then exact.
	waitAll := func(seq int64) {
		mu.Lock()
		defer mu.Unlock()
		for {
			all := true
			for _, s := range seen {
				all = all && s >= seq
			}
			if all {
				return
			}
			cond.Wait()
		}
	}
	waitAll(1)
	for seq := int64(2); seq < 2+appends; seq++ {
		if err := w.Append(ctx, "t", storetest.Ev(seq, gen.EventTypeStep)); err != nil {
			t.Fatal(err)
		}
		waitAll(seq)
	}
	if err := w.Finish(ctx, "t", storetest.Tail(2+appends), ask.Turn{}); err != nil {
		t.Fatal(err)
	}
	for range readers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i, last := range seen {
		if last != appends+4 {
			t.Errorf("reader %d ended at seq %d, want %d", i, last, appends+4)
		}
	}
	// One read for the first batch, one per append, one for the end.
	if got, want := xranges()-before, 1+appends+1; got != want {
		t.Errorf("%d readers over %d changes: %d XRANGE, want %d (one per change per instance)", readers, appends+1, got, want)
	}
	// A replay of the finished log is answered from memory.
	before = xranges()
	for range 10 {
		b, err := s.Read(ctx, "t", 0)
		if err != nil || len(b.Events) != appends+4 || !b.Finished {
			t.Fatalf("replay: %d events, finished %v, %v", len(b.Events), b.Finished, err)
		}
	}
	if got := xranges() - before; got != 0 {
		t.Errorf("10 replays of a finished log: %d XRANGE, want 0", got)
	}
}

// TestHubFreeRunning: readers that join at any time, from any cursor, while the writer
// appends as fast as it can, get every event after their cursor exactly once and in order;
// a reader that stalls holds up neither the writer nor the others. Reads stay at most one per
// change, on the writer's instance (which takes its own writes into the tail) as on another.
func TestHubFreeRunning(t *testing.T) {
	for _, same := range []bool{true, false} {
		t.Run(map[bool]string{true: "WriterInstance", false: "OtherInstance"}[same], func(t *testing.T) {
			testFreeRunning(t, same)
		})
	}
}

func testFreeRunning(t *testing.T, same bool) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	ctx := t.Context()
	s := newStore(t, srv, redisstore.Options{Prefix: "free:", Replica: "r"})
	w := s
	if !same {
		w = newStore(t, srv, redisstore.Options{Prefix: "free:", Replica: "w"})
	}
	newTicket(t, w, "t")
	const readers, appends = 30, 300
	last := int64(appends + 4)
	before := calls(t, rc, "xrange")

	// The stalled reader takes its first batch and never reads again.
	stalled, err := s.Read(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	start := func(i int, after int64) {
		wg.Go(func() {
			next := after + 1
			err := follow(ctx, s, "t", after, func(ev store.Event) {
				if ev.Seq != next {
					errs <- fmt.Errorf("reader %d (from %d): seq %d, want %d", i, after, ev.Seq, next)
				}
				next = ev.Seq + 1
			})
			if err == nil && next != last+1 {
				err = fmt.Errorf("reader %d (from %d) ended before done: next %d", i, after, next)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	for i := range readers / 2 {
		start(i, 0)
	}
	for seq := int64(2); seq < 2+appends; seq++ {
		if err := w.Append(ctx, "t", storetest.Ev(seq, gen.EventTypeStep)); err != nil {
			t.Fatal(err)
		}
		if seq%20 == 0 && seq/20 <= readers/2 { // a reader joins mid-stream, from 0 or from here
			after := int64(0)
			if seq%40 == 0 {
				after = seq
			}
			start(readers/2+int(seq/20)-1, after)
		}
	}
	if err := w.Finish(ctx, "t", storetest.Tail(2+appends), ask.Turn{}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	select {
	case <-stalled.Changed: // closed long ago, never read: it cost nobody anything
	default:
		t.Error("the stalled reader's channel was never closed")
	}
	got, changes := calls(t, rc, "xrange")-before, appends+2
	if got > changes {
		t.Errorf("%d readers over %d changes: %d XRANGE, want at most one per change", readers, changes, got)
	}
	t.Logf("%d readers over %d changes: %d XRANGE", readers, changes, got)
}

// TestHubEvictionAsTheLog: a tail read bit by bit while the log evicts its oldest steps holds
// exactly what the log retains (compared with a fresh instance's read of the whole log).
func TestHubEvictionAsTheLog(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	rnd := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		prefix := "ev" + strconv.Itoa(round) + ":"
		maxEvents := 2 + rnd.IntN(6)
		s := newStore(t, srv, redisstore.Options{Prefix: prefix, MaxEvents: maxEvents})
		newTicket(t, s, "t")
		seq := int64(2)
		for range 1 + rnd.IntN(6) {
			for range rnd.IntN(8) {
				typ := gen.EventTypeStep
				if rnd.IntN(3) == 0 {
					typ = gen.EventTypeBranch
				}
				if err := s.Append(ctx, "t", storetest.Ev(seq, typ)); err != nil {
					t.Fatal(err)
				}
				seq++
			}
			got, err := s.Read(ctx, "t", 0)
			if err != nil {
				t.Fatal(err)
			}
			fresh := newStore(t, srv, redisstore.Options{Prefix: prefix, MaxEvents: maxEvents})
			want, err := fresh.Read(ctx, "t", 0)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := seqsOf(got.Events), seqsOf(want.Events); g != w {
				t.Fatalf("round %d (max %d): the tail holds %s, the log %s", round, maxEvents, g, w)
			}
		}
	}
}

func seqsOf(evs []store.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%d%c ", e.Seq, e.Type[0])
	}
	return b.String()
}

// TestHubSubscriptionLost: when the change subscription is dropped (CLIENT KILL TYPE pubsub),
// every waiting reader and end watcher is woken once it is back, and nothing appended
// meanwhile is lost.
func TestHubSubscriptionLost(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	w := newStore(t, srv, redisstore.Options{Prefix: "lost:", Replica: "w"})
	s := newStore(t, srv, redisstore.Options{Prefix: "lost:", Replica: "r"})
	subscriptionLost(t, w, s, func() error { return rc.Do(t.Context(), "CLIENT", "KILL", "TYPE", "pubsub").Err() })
}

// TestHubSubscriptionLostCluster: the same on a three-primary Redis Cluster, every node's
// pubsub connections killed.
func TestHubSubscriptionLostCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t, 3, 0)
	url := "redis+cluster://" + strings.Join(c.Addrs(), ",")
	open := func(replica string) *redisstore.Store {
		s, err := redisstore.New(t.Context(), redisstore.Options{URL: url, Prefix: "lostc:", Replica: replica})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	subscriptionLost(t, open("w"), open("r"), func() error {
		for _, addr := range c.Addrs() {
			n := goredis.NewClient(&goredis.Options{Addr: addr})
			err := n.Do(t.Context(), "CLIENT", "KILL", "TYPE", "pubsub").Err()
			_ = n.Close()
			if err != nil && !strings.Contains(err.Error(), "No such client") {
				return err
			}
		}
		return nil
	})
}

// subscriptionLost: readers and the lease watch on s, the writer w; kill drops the pubsub
// connections.
func subscriptionLost(t *testing.T, w, s *redisstore.Store, kill func() error) {
	ctx := t.Context()
	newTicket(t, w, "t")
	var changes []<-chan struct{}
	for range 5 {
		b, err := s.Read(ctx, "t", 1)
		if err != nil {
			t.Fatal(err)
		}
		changes = append(changes, b.Changed)
	}
	fin, watch, err := s.WatchFinished(ctx, "t")
	if err != nil || fin {
		t.Fatalf("watch: %v, %v", fin, err)
	}
	called, f := notifyCounter()
	if fin, _, err := s.NotifyFinished(ctx, "t", f); err != nil || fin {
		t.Fatalf("notify: %v, %v", fin, err)
	}
	if err := kill(); err != nil {
		t.Fatal(err)
	}
	// Appended, on another instance, while the subscription may be down: its notification
	// may be lost.
	if err := w.Append(ctx, "t", storetest.Ev(2, gen.EventTypeStep)); err != nil {
		t.Fatal(err)
	}
	for i, ch := range changes {
		storetest.Closed(t, ch, "reader "+strconv.Itoa(i)+" after the subscription was lost")
	}
	storetest.Closed(t, watch, "the end watch after the subscription was lost")
	storetest.Closed(t, called.first, "the end's function after the subscription was lost")
	b, err := s.Read(ctx, "t", 1)
	if err != nil || len(b.Events) != 1 || b.Events[0].Seq != 2 {
		t.Fatalf("read after the subscription came back: %+v, %v", b, err)
	}
	// And notifications flow again.
	if err := w.Append(ctx, "t", storetest.Ev(3, gen.EventTypeStep)); err != nil {
		t.Fatal(err)
	}
	storetest.Closed(t, b.Changed, "a reader after the subscription came back")
}

// TestHubExpiredWhileCached: a finished ticket answered from memory answers ErrNotFound once
// Redis has let it expire.
func TestHubExpiredWhileCached(t *testing.T) {
	const prefix = "exp:"
	ctx := t.Context()
	rc, s := onRedis(t, redisstore.Options{Prefix: prefix, TTL: 300 * time.Millisecond})
	if err := rc.ConfigSet(ctx, "notify-keyspace-events", "Ex").Err(); err != nil {
		t.Fatal(err)
	}
	expired := rc.Subscribe(ctx, "__keyevent@0__:expired")
	defer expired.Close()
	if _, err := expired.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	newTicket(t, s, "t")
	if err := s.Finish(ctx, "t", storetest.Tail(2), ask.Turn{}); err != nil {
		t.Fatal(err)
	}
	before := calls(t, rc, "xrange")
	for range 3 {
		if b, err := s.Read(ctx, "t", 0); err != nil || !b.Finished || len(b.Events) != 4 {
			t.Fatalf("read of the finished ticket: %+v, %v", b, err)
		}
	}
	if got := calls(t, rc, "xrange") - before; got != 1 {
		t.Errorf("3 reads of a finished ticket: %d XRANGE, want 1", got)
	}
	// Wait for Redis to expire the ticket's hash (no sleep: the expiry event says when).
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		m, err := expired.ReceiveMessage(wctx)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(m.Payload, "{"+prefix) && strings.HasSuffix(m.Payload, "}t:t") {
			break
		}
	}
	if _, err := s.Read(ctx, "t", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("read after the ticket expired: %v, want ErrNotFound", err)
	}
	if _, _, err := s.WatchFinished(ctx, "t"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("watch after the ticket expired: %v, want ErrNotFound", err)
	}
}

// TestHubCryptoShredded: an instance without the key that sealed a ticket's question answers
// ErrNotFound however often it is asked, while the instance with the key reads it (from its
// tail); neither caches the other's answer.
func TestHubCryptoShredded(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	k1, err := seal.ParseKeys(seal.NewKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	k2, err := seal.ParseKeys(seal.NewKey("k2"))
	if err != nil {
		t.Fatal(err)
	}
	a := newStore(t, srv, redisstore.Options{Prefix: "shred:", Seal: k1})
	newTicket(t, a, "t")
	if err := a.Finish(ctx, "t", storetest.Tail(2), ask.Turn{}); err != nil {
		t.Fatal(err)
	}
	if b, err := a.Read(ctx, "t", 0); err != nil || string(b.Events[0].Data) != string(storetest.Ev(1, gen.EventTypeAccepted).Data) {
		t.Fatalf("the sealing instance's read: %+v, %v", b, err)
	}
	shredded := newStore(t, srv, redisstore.Options{Prefix: "shred:", Seal: k2})
	for range 2 {
		if _, err := shredded.Read(ctx, "t", 0); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("read without the key: %v, want ErrNotFound", err)
		}
	}
	if _, err := a.Read(ctx, "t", 0); err != nil {
		t.Errorf("the sealing instance after the other's refusal: %v", err)
	}
}

// TestHubBounded: the hub keeps no more than its byte bound (the ticket read last aside), and
// readers of tails it dropped read again correctly.
func TestHubBounded(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	const bound = 4 << 10
	s := newStore(t, srv, redisstore.Options{CacheBytes: bound})
	var changes []<-chan struct{}
	for i := range 40 {
		id := "t" + strconv.Itoa(i)
		newTicket(t, s, id)
		for seq := int64(2); seq < 6; seq++ {
			if err := s.Append(ctx, id, storetest.Ev(seq, gen.EventTypeStep)); err != nil {
				t.Fatal(err)
			}
		}
		b, err := s.Read(ctx, id, 0)
		if err != nil || len(b.Events) != 5 {
			t.Fatalf("read %s: %d events, %v", id, len(b.Events), err)
		}
		changes = append(changes, b.Changed)
		if _, bytes := redisstore.HubStats(s); bytes > bound {
			t.Fatalf("the hub holds %d bytes, bound %d", bytes, bound)
		}
	}
	tails, _ := redisstore.HubStats(s)
	if tails >= 40 {
		t.Errorf("the hub holds %d tails of 40, bound %d bytes", tails, bound)
	}
	// The first ticket's tail was dropped: its reader was woken, and reads on.
	storetest.Closed(t, changes[0], "a reader of a dropped tail")
	if err := s.Append(ctx, "t0", storetest.Ev(6, gen.EventTypeStep)); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Read(ctx, "t0", 5); err != nil || len(b.Events) != 1 || b.Events[0].Seq != 6 {
		t.Errorf("read of a dropped tail: %+v, %v", b, err)
	}
}

// runnerAndPeer is two instances of the store on one Redis, a and b, and the ticket t, which a
// created (and runs); rc is a plain client of the same Redis.
func runnerAndPeer(t *testing.T, prefix string) (rc *goredis.Client, a, b *redisstore.Store) {
	t.Helper()
	srv := redistest.Start(t)
	a = newStore(t, srv, redisstore.Options{Prefix: prefix, Replica: "a"})
	b = newStore(t, srv, redisstore.Options{Prefix: prefix, Replica: "b"})
	newTicket(t, a, "t")
	return raw(t, srv), a, b
}

// TestWatchFinished: the lease watch of the instance that created the ticket starts without
// a read (another instance's reads the flag once), is not woken by the runner's appends, is
// woken by an end from another instance, and then reports the ticket finished.
func TestWatchFinished(t *testing.T) {
	rc, a, b := runnerAndPeer(t, "w:")
	ctx := t.Context()
	h0 := calls(t, rc, "hget")
	fin, ch, err := a.WatchFinished(ctx, "t")
	if err != nil || fin {
		t.Fatalf("watch: %v, %v", fin, err)
	}
	if got := calls(t, rc, "hget") - h0; got != 0 {
		t.Errorf("the creator's watch read the ticket %d times, want 0", got)
	}
	h0 = calls(t, rc, "hget")
	finB, chB, err := b.WatchFinished(ctx, "t")
	if err != nil || finB {
		t.Fatalf("another instance's watch: %v, %v", finB, err)
	}
	if got := calls(t, rc, "hget") - h0; got != 1 {
		t.Errorf("another instance's watch read the ticket %d times, want 1", got)
	}
	before := calls(t, rc, "hget") + calls(t, rc, "xrange")
	appendSteps(t, a, "t")
	select {
	case <-ch:
		t.Fatal("the watch was woken by the runner's appends")
	default:
	}
	if got := calls(t, rc, "hget") + calls(t, rc, "xrange") - before; got != 2 { // the reader's read, with its HGET
		t.Errorf("appends with a watch: %d reads, want only the reader's 2", got)
	}
	if err := b.End(ctx, "t", storetest.Tail(13), ask.Turn{}, false); err != nil {
		t.Fatal(err)
	}
	storetest.Closed(t, ch, "the watch, at an end from another instance")
	storetest.Closed(t, chB, "the ending instance's own watch")
	if fin, _, err := a.WatchFinished(ctx, "t"); err != nil || !fin {
		t.Errorf("watch after the end: %v, %v", fin, err)
	}
}

// appendSteps appends steps 2 to 12 to ticket on s (created by newTicket) as its runner, and
// returns once their notifications are through: a reader of the log after the eleventh is woken
// by the twelfth.
func appendSteps(t *testing.T, s *redisstore.Store, ticket string) {
	t.Helper()
	ctx := t.Context()
	for seq := int64(2); seq < 12; seq++ {
		if err := s.Append(ctx, ticket, storetest.Ev(seq, gen.EventTypeStep)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := s.Read(ctx, ticket, 11)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, ticket, storetest.Ev(12, gen.EventTypeStep)); err != nil {
		t.Fatal(err)
	}
	storetest.Closed(t, r.Changed, "a reader")
}

// TestNotifyFinished: NotifyFinished is WatchFinished with a function: registered by the
// instance that created the ticket, it reads nothing; the runner's appends do not call it; an
// end from another instance calls it once; a function taken off first is never called; and a
// finished or gone ticket is answered at once, its function never called.
func TestNotifyFinished(t *testing.T) {
	rc, a, b := runnerAndPeer(t, "n:")
	ctx := t.Context()
	h0 := calls(t, rc, "hget")
	called, f := notifyCounter()
	fin, stop, err := a.NotifyFinished(ctx, "t", f)
	if err != nil || fin || stop == nil {
		t.Fatalf("notify: %v, %v", fin, err)
	}
	if got := calls(t, rc, "hget") - h0; got != 0 {
		t.Errorf("the creator's registration read the ticket %d times, want 0", got)
	}
	taken, g := notifyCounter()
	_, stopG, err := a.NotifyFinished(ctx, "t", g)
	if err != nil {
		t.Fatal(err)
	}
	if !stopG() {
		t.Error("a function taken off before the end: stop reported it called")
	}
	h0 = calls(t, rc, "hget")
	calledB, fB := notifyCounter()
	if fin, _, err := b.NotifyFinished(ctx, "t", fB); err != nil || fin {
		t.Fatalf("another instance's registration: %v, %v", fin, err)
	}
	if got := calls(t, rc, "hget") - h0; got != 1 {
		t.Errorf("another instance's registration read the ticket %d times, want 1", got)
	}
	appendSteps(t, a, "t")
	if n := called.n.Load(); n != 0 {
		t.Fatalf("the runner's appends called the function %d times", n)
	}
	if err := b.End(ctx, "t", storetest.Tail(13), ask.Turn{}, false); err != nil {
		t.Fatal(err)
	}
	storetest.Closed(t, called.first, "the function, at an end from another instance")
	storetest.Closed(t, calledB.first, "the ending instance's own function")
	if stop() {
		t.Error("stop after the call reported the function taken off")
	}
	// Another end notification (a second ticket's) goes through the same goroutine after the
	// first: once it is seen, the first's calls are all made.
	newTicket(t, a, "u")
	_, _, _ = a.NotifyFinished(ctx, "u", func() {})
	seen, h := notifyCounter()
	if _, _, err := a.NotifyFinished(ctx, "u", h); err != nil {
		t.Fatal(err)
	}
	if err := b.End(ctx, "u", storetest.Tail(2), ask.Turn{}, false); err != nil {
		t.Fatal(err)
	}
	storetest.Closed(t, seen.first, "the second ticket's function")
	if n, m := called.n.Load(), taken.n.Load(); n != 1 || m != 0 {
		t.Errorf("calls: %d of the registered function (want 1), %d of the one taken off (want 0)", n, m)
	}
	if fin, stop, err := a.NotifyFinished(ctx, "t", func() { t.Error("called for a finished ticket") }); err != nil || !fin || stop != nil {
		t.Errorf("notify after the end: %v, %v", fin, err)
	}
	if _, _, err := a.NotifyFinished(ctx, "gone", func() { t.Error("called for a ticket that is not there") }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("notify of a ticket that does not exist: %v, want ErrNotFound", err)
	}
}

// notifyCount counts the calls of a function given to NotifyFinished; first closes at the
// first.
type notifyCount struct {
	n     atomic.Int64
	first chan struct{}
}

func notifyCounter() (*notifyCount, func()) {
	c := &notifyCount{first: make(chan struct{})}
	return c, func() {
		if c.n.Add(1) == 1 {
			close(c.first)
		}
	}
}

// TestHubReadsOwnWrites: the instance that appends reads what it appended at once, from its
// tail, without a read of Redis: neither its appends nor its end are read back.
func TestHubReadsOwnWrites(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	ctx := t.Context()
	s := newStore(t, srv, redisstore.Options{MaxEvents: 8})
	newTicket(t, s, "t")
	b, err := s.Read(ctx, "t", 0) // loads the tail: one XRANGE
	if err != nil {
		t.Fatal(err)
	}
	before := calls(t, rc, "xrange")
	for seq := int64(2); seq < 20; seq++ {
		if err := s.Append(ctx, "t", storetest.Ev(seq, gen.EventTypeStep)); err != nil {
			t.Fatal(err)
		}
		storetest.Closed(t, b.Changed, "the reader, at the instance's own append")
		if b, err = s.Read(ctx, "t", seq-1); err != nil || len(b.Events) != 1 || b.Events[0].Seq != seq {
			t.Fatalf("read after appending %d: %+v, %v", seq, b, err)
		}
	}
	if err := s.Finish(ctx, "t", storetest.Tail(20), ask.Turn{}); err != nil {
		t.Fatal(err)
	}
	if b, err = s.Read(ctx, "t", 0); err != nil || !b.Finished {
		t.Fatalf("read after the end: %+v, %v", b, err)
	}
	if got := calls(t, rc, "xrange") - before; got != 0 {
		t.Errorf("the writer's own reads: %d XRANGE, want 0", got)
	}
	// What the tail holds is what the log holds, evictions included.
	fresh := newStore(t, srv, redisstore.Options{Prefix: redisstore.PrefixOf(s), MaxEvents: 8})
	want, err := fresh.Read(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := seqsOf(b.Events), seqsOf(want.Events); g != w {
		t.Errorf("the writer's tail holds %s, the log %s", g, w)
	}
}

// TestCloseWakesWatchers: Close wakes the lease watch as it wakes readers.
func TestCloseWakesWatchers(t *testing.T) {
	srv := redistest.Start(t)
	s, err := redisstore.New(t.Context(), redisstore.Options{URL: srv.URL, Prefix: "closew:"})
	if err != nil {
		t.Fatal(err)
	}
	newTicket(t, s, "t")
	fin, ch, err := s.WatchFinished(t.Context(), "t")
	if err != nil || fin {
		t.Fatalf("watch: %v, %v", fin, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	storetest.Closed(t, ch, "close")
	if tails, bytes := redisstore.HubStats(s); tails != 0 || bytes != 0 {
		t.Errorf("after Close the hub holds %d tails, %d bytes", tails, bytes)
	}
}

// TestHubRemoteEnd: a replica (B) that did not write a ticket's log and ends it (a cancel:
// End, as the server's endRemote does) reads it as Redis holds it, evictions included: with
// none, seq 1..n, each once. That holds whether B's tail was stale (it read only the accepted
// event: the End does not continue it) or caught up to the seq its End continues (the End
// merges into it), and whether the End first lost the race with the runner's (A's) append
// (ErrSeq) and was retried; a reader following the ticket on B gets the same seqs. No sleeps:
// A's notifications only mark B's tail stale, so in whatever order they reach B, what B's tail
// holds at its End is fixed by the calls' order.
func TestHubRemoteEnd(t *testing.T) {
	srv := redistest.Start(t)
	for _, maxEvents := range []int{1000, 6} {
		for _, caught := range []bool{false, true} {
			for _, race := range []bool{false, true} {
				t.Run(fmt.Sprintf("max%d/caught=%v/race=%v", maxEvents, caught, race), func(t *testing.T) {
					remoteEnd(t, srv, maxEvents, caught, race)
				})
			}
		}
	}
}

func remoteEnd(t *testing.T, srv *redistest.Server, maxEvents int, caught, race bool) {
	ctx := t.Context()
	a := newStore(t, srv, redisstore.Options{MaxEvents: maxEvents})
	prefix := redisstore.PrefixOf(a)
	b := newStore(t, srv, redisstore.Options{Prefix: prefix, MaxEvents: maxEvents})
	newTicket(t, a, "t")
	// B holds a tail of the ticket before A appends: the accepted event only.
	if r, err := b.Read(ctx, "t", 0); err != nil || len(r.Events) != 1 {
		t.Fatalf("B's first read: %+v, %v", r, err)
	}
	// A reader on B follows the ticket from the start: while A appends when B's tail catches
	// up anyway, else only after B's End, since its reads would catch the tail up.
	var followed []int64
	follower := make(chan error, 1)
	startFollower := func() {
		go func() {
			follower <- follow(ctx, b, "t", 0, func(ev store.Event) { followed = append(followed, ev.Seq) })
		}()
	}
	if caught {
		startFollower()
	}
	// A runs: batches of steps around a branch open.
	if _, err := a.AppendBatch(ctx, "t", storetest.Evs(2, 10, gen.EventTypeStep)); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, "t", storetest.Ev(12, gen.EventTypeBranch)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AppendBatch(ctx, "t", storetest.Evs(13, 10, gen.EventTypeStep)); err != nil {
		t.Fatal(err)
	}
	// B ends the log after the last seq it learnt, as endRemote does.
	last := func() int64 {
		tk, err := b.Ticket(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		if caught {
			// Read on until B's tail reaches it (branchesOpenIn), so that the End's own
			// write continues the tail.
			for after := int64(0); after < tk.LastSeq; {
				r, err := b.Read(ctx, "t", after)
				if err != nil {
					t.Fatal(err)
				}
				if n := len(r.Events); n > 0 {
					after = r.Events[n-1].Seq
				}
				if after < tk.LastSeq {
					<-r.Changed
				}
			}
		}
		return tk.LastSeq
	}
	seq := last()
	if race {
		// A appends after B read the last seq: B's End fails, and stops A's appends.
		if err := a.Append(ctx, "t", storetest.Ev(seq+1, gen.EventTypeStep)); err != nil {
			t.Fatal(err)
		}
		if err := b.End(ctx, "t", storetest.Tail(seq+1), ask.Turn{}, false); !errors.Is(err, store.ErrSeq) {
			t.Fatalf("B's End after A's append: %v, want ErrSeq", err)
		}
		if err := a.Append(ctx, "t", storetest.Ev(seq+2, gen.EventTypeStep)); !errors.Is(err, store.ErrFinished) {
			t.Fatalf("A's append after B's failed End: %v, want ErrFinished", err)
		}
		seq = last()
	}
	if err := b.End(ctx, "t", storetest.Tail(seq+1), ask.Turn{}, false); err != nil {
		t.Fatal(err)
	}
	if !caught {
		startFollower()
	}
	if err := <-follower; err != nil {
		t.Fatal(err)
	}
	got, err := b.Read(ctx, "t", 0)
	if err != nil || !got.Finished {
		t.Fatalf("B's read after its End: %+v, %v", got, err)
	}
	want, err := newStore(t, srv, redisstore.Options{Prefix: prefix, MaxEvents: maxEvents}).Read(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := seqsOf(got.Events), seqsOf(want.Events); g != w {
		t.Errorf("B's tail holds %s, the log %s", g, w)
	}
	n := seq + 3 // the Tail's three events end the log
	if maxEvents < int(n) {
		return // evicted: the follower may have read steps since evicted
	}
	for i, ev := range want.Events {
		if ev.Seq != int64(i+1) {
			t.Fatalf("the log holds %s, want seq 1..%d", seqsOf(want.Events), n)
		}
	}
	if len(want.Events) != int(n) || len(followed) != int(n) || followed[n-1] != n {
		t.Errorf("the log holds %d events, the follower on B got %v; want 1..%d", len(want.Events), followed, n)
	}
}

// TestFinishedWatchForgotten: a watch of a ticket found finished is not kept. A run's lease
// registers its watch again after any end notification not of its own end (another replica's
// cancel or lapse sweep ended the log), and finds the ticket finished; the hub, holding no
// finished tail of it, had made a watch for it, which no later end would close: every such
// end left an entry behind for the replica's life.
func TestFinishedWatchForgotten(t *testing.T) {
	_, a, b := runnerAndPeer(t, "f:")
	ctx := t.Context()
	fin, ch, err := a.WatchFinished(ctx, "t")
	if err != nil || fin {
		t.Fatalf("watch: %v, %v", fin, err)
	}
	if err := b.End(ctx, "t", storetest.Tail(2), ask.Turn{}, false); err != nil {
		t.Fatal(err)
	}
	storetest.Closed(t, ch, "the runner's watch, at an end from another instance")
	for i := range 3 {
		if fin, _, err := a.WatchFinished(ctx, "t"); err != nil || !fin {
			t.Fatalf("watch %d after the end: %v, %v", i, fin, err)
		}
		if fin, stop, err := a.NotifyFinished(ctx, "t", func() {}); err != nil || !fin || stop != nil {
			t.Fatalf("notify %d after the end: %v, %v", i, fin, err)
		}
	}
	if got := redisstore.HubWatches(a); got != 0 {
		t.Errorf("the hub holds %d end watches of a finished ticket, want 0", got)
	}
}

// TestEndedElsewhereForgotten: the creator of a ticket another instance ended forgets what it
// kept for the run's own end (its conversation and owner) once its watch or its renewal finds
// the ticket finished, as it does when it ends the ticket itself: the run ends there without an
// end of its own, and the entry stayed until 65,536 of them were dropped at once.
func TestEndedElsewhereForgotten(t *testing.T) {
	for _, learn := range []struct {
		name string
		f    func(ctx context.Context, a *redisstore.Store, ticket string) error
	}{
		{"watch", func(ctx context.Context, a *redisstore.Store, ticket string) error {
			fin, _, err := a.NotifyFinished(ctx, ticket, func() {})
			if err == nil && !fin {
				err = errors.New("unfinished")
			}
			return err
		}},
		{"renewal", func(ctx context.Context, a *redisstore.Store, ticket string) error {
			if err := a.Renew(ctx, ticket, store.Usage{}); !errors.Is(err, store.ErrFinished) {
				return fmt.Errorf("renew: %v, want ErrFinished", err)
			}
			return nil
		}},
	} {
		t.Run(learn.name, func(t *testing.T) {
			_, a, b := runnerAndPeer(t, "e"+learn.name+":")
			ctx := t.Context()
			if got := redisstore.RunsHeld(a); got != 1 {
				t.Fatalf("the creator keeps %d runs, want 1", got)
			}
			_, ch, err := a.WatchFinished(ctx, "t")
			if err != nil {
				t.Fatal(err)
			}
			if err := b.End(ctx, "t", storetest.Tail(2), ask.Turn{}, false); err != nil {
				t.Fatal(err)
			}
			storetest.Closed(t, ch, "the runner's watch, at an end from another instance")
			if err := learn.f(ctx, a, "t"); err != nil {
				t.Fatal(err)
			}
			if got := redisstore.RunsHeld(a); got != 0 {
				t.Errorf("the creator keeps %d runs after its ticket was ended elsewhere, want 0", got)
			}
		})
	}
}
