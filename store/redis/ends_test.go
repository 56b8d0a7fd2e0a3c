package redis_test

import (
	"crypto/rand"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/faultproxy"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/storetest"
)

// Runs' ends that arrive while another is in flight go together, as one script call, once it
// is answered; each answers for itself: ended, refused (a ticket another end finished), or the
// error its own keys raised, the others unharmed.
func TestEndsArrivingTogetherShareOneCall(t *testing.T) {
	ctx := t.Context()
	prefix := "ends:" + rand.Text() + ":"
	s, p, direct := heldBehindProxy(t, prefix)
	other, err := redisstore.New(ctx, redisstore.Options{Client: direct, Prefix: prefix}) // another replica
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })

	event := func(tid string, seq int, typ gen.EventType, body string) store.Event {
		return store.Event{Seq: int64(seq), Type: typ, Data: []byte(`{"seq":` + strconv.Itoa(seq) + `,"ticket":"` + tid + `","type":"` + string(typ) + `"` + body + `}`)}
	}
	tail := func(tid, text string) []store.Event {
		return []store.Event{event(tid, 2, gen.EventTypeAnswer, `,"text":"`+text+`"`), event(tid, 3, gen.EventTypeDone, `,"outcome":"answer","text":"`+text+`"`)}
	}
	turn := ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer, Text: "42"}
	const n = 8 // one end in flight, the others queued behind it
	round := func(check bool) {
		tids := make([]string, n)
		for i := range tids {
			tids[i] = "t-" + rand.Text()
			storetest.MustConv(t, s, "c-"+tids[i], storetest.Alice)
			if _, err := storetest.NewTicket(t, s, tids[i], "c-"+tids[i], storetest.Alice, store.Limits{}); err != nil {
				t.Fatal(err)
			}
		}
		// Another replica has ended the next-to-last ticket already: its runner's end is refused.
		// The last one's log is not a stream: its end raises WRONGTYPE inside the script.
		finished, broken := tids[n-2], tids[n-1]
		if err := other.End(ctx, finished, tail(finished, "first"), turn, false); err != nil {
			t.Fatal(err)
		}
		if err := direct.Set(ctx, redisstore.LogKey(s, broken), "not a stream", 0).Err(); err != nil {
			t.Fatal(err)
		}
		before := calls(t, direct, "evalsha")

		p.Stall() // the first end goes out and waits in the proxy
		errs := make([]error, n)
		var wg sync.WaitGroup
		wg.Go(func() { errs[0] = s.Finish(ctx, tids[0], tail(tids[0], "answer"), turn) })
		if err := p.WaitStats(ctx, func(st faultproxy.Stats) bool { return st.Held >= 1 }); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < n; i++ {
			wg.Go(func() { errs[i] = s.Finish(ctx, tids[i], tail(tids[i], "answer"), turn) })
		}
		waitFor(t, func() bool { return redisstore.PendingEnds(s, tids[0]) == n-1 })
		p.Pass()
		wg.Wait()
		endCalls := calls(t, direct, "evalsha") - before // before the checks below, whose reads are scripts too

		for i, err := range errs {
			switch {
			case i == n-2:
				if !errors.Is(err, store.ErrFinished) {
					t.Errorf("the end of a ticket finished before: %v, want ErrFinished", err)
				}
			case i == n-1:
				if err == nil || errors.Is(err, store.ErrUnavailable) {
					t.Errorf("the end of a ticket whose log is not a stream: %v, want its WRONGTYPE", err)
				}
			case err != nil:
				t.Errorf("end %d: %v", i, err)
			default:
				tk, err := s.Ticket(ctx, tids[i])
				if err != nil || tk.Done == nil || tk.LastSeq != 3 || string(tk.Terminal.Data) != string(tail(tids[i], "answer")[0].Data) {
					t.Errorf("ticket %d after its end: %+v, %v", i, tk, err)
				}
			}
		}
		if tk, err := s.Ticket(ctx, finished); err != nil || string(tk.Terminal.Data) != string(tail(finished, "first")[0].Data) {
			t.Errorf("the ticket finished before: %+v, %v: the refused end changed it", tk, err)
		}
		// The first end went alone; the seven queued behind it, one call.
		if got := endCalls; check && got != 2 {
			t.Errorf("%d EVALSHA calls for %d ends, want 2 (the first alone, then the rest together)", got, n)
		}
		if got := redisstore.InflightEnds(s, tids[0]); got != 0 {
			t.Errorf("%d end calls in flight once every end was answered, want 0", got)
		}
	}
	round(false) // loads the scripts (a first call of a script is EVALSHA, then EVAL)
	round(true)
}

// Ends that make a full batch while a call is in flight go at once as another call, up to
// MaxEndCalls in flight, so that ends arriving faster than one call a round trip carries keep up;
// the ends after them wait again.
func TestAFullBatchOfEndsGoesAtOnce(t *testing.T) {
	ctx := t.Context()
	s, p, direct := heldBehindProxy(t, "full:"+rand.Text()+":")
	turn := ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer, Text: "42"}
	const full = redisstore.MaxEndBatch
	tids := make([]string, 1+full+1) // one in flight, a full batch, one more
	for i := range tids {
		tids[i] = "t-" + rand.Text()
		storetest.MustConv(t, s, "c-"+tids[i], storetest.Alice)
		if _, err := storetest.NewTicket(t, s, tids[i], "c-"+tids[i], storetest.Alice, store.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	// Load the scripts first (a first call of a script is EVALSHA, then EVAL): end one more ticket.
	extra := "t-" + rand.Text()
	storetest.MustConv(t, s, "c-"+extra, storetest.Alice)
	if _, err := storetest.NewTicket(t, s, extra, "c-"+extra, storetest.Alice, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, extra, storetest.Tail(2), turn); err != nil {
		t.Fatal(err)
	}
	before := calls(t, direct, "evalsha")

	p.Stall()
	errs := make([]error, len(tids))
	var wg sync.WaitGroup
	finish := func(i int) { wg.Go(func() { errs[i] = s.Finish(ctx, tids[i], storetest.Tail(2), turn) }) }
	finish(0)
	waitFor(t, func() bool { return redisstore.InflightEnds(s, tids[0]) == 1 })
	for i := 1; i < full; i++ {
		finish(i)
	}
	waitFor(t, func() bool { return redisstore.PendingEnds(s, tids[0]) == full-1 })
	if got := redisstore.InflightEnds(s, tids[0]); got != 1 {
		t.Fatalf("%d calls in flight with a batch short of full waiting, want 1", got)
	}
	finish(full) // the batch is full: it goes
	waitFor(t, func() bool {
		return redisstore.InflightEnds(s, tids[0]) == 2 && redisstore.PendingEnds(s, tids[0]) == 0
	})
	finish(full + 1) // waits again
	waitFor(t, func() bool { return redisstore.PendingEnds(s, tids[0]) == 1 })
	p.Pass()
	wg.Wait()
	endCalls := calls(t, direct, "evalsha") - before // before the checks below, whose reads are scripts too
	for i, err := range errs {
		if err != nil {
			t.Errorf("end %d: %v", i, err)
		} else if tk, err := s.Ticket(ctx, tids[i]); err != nil || tk.Done == nil {
			t.Errorf("ticket %d after its end: %+v, %v", i, tk, err)
		}
	}
	if got := endCalls; got != 3 {
		t.Errorf("%d EVALSHA calls, want 3 (the first alone, the full batch, the one after it)", got)
	}
	if got := redisstore.InflightEnds(s, tids[0]); got != 0 {
		t.Errorf("%d end calls in flight once every end was answered, want 0", got)
	}
}

// heldBehindProxy is a store under prefix whose client reaches a fresh Redis through a fault proxy,
// with a read timeout far above a test's own pace (replies are held on purpose); the proxy; and
// a client that reaches the same Redis directly.
func heldBehindProxy(t *testing.T, prefix string) (*redisstore.Store, *faultproxy.Proxy, *goredis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	rc := goredis.NewClient(&goredis.Options{Addr: p.Addr(), ReadTimeout: time.Minute})
	t.Cleanup(func() { _ = rc.Close() })
	s, err := redisstore.New(t.Context(), redisstore.Options{Client: rc, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	direct := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = direct.Close() })
	return s, p, direct
}

// waitFor waits until cond holds, or fails the test when its context ends first.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-t.Context().Done():
			t.Fatal("the condition never held")
		case <-time.After(100 * time.Microsecond):
		}
	}
}

// On a real Redis Cluster, the runs' ends of many owners, released at once, share calls only
// within a bucket (one hash slot): every end lands, and no call spans slots.
func TestEndsTogetherOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	c := redistest.StartCluster(t, 3, 0)
	var h slotHook
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs()})
	cc.AddHook(&h)
	t.Cleanup(func() { _ = cc.Close() })
	ctx := t.Context()
	s, err := redisstore.New(ctx, redisstore.Options{Client: cc, Prefix: "cle:" + rand.Text() + ":"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	const owners, per = 32, 4
	var tids []string
	for i := range owners {
		o := store.Owner{Tenant: "t1", OID: "o" + strconv.Itoa(i)} // homed ids: the owners' buckets
		for range per {
			tid, cid := "t_"+rand.Text()+"-"+s.Home(o), "c_"+rand.Text()+"-"+s.Home(o)
			storetest.MustConv(t, s, cid, o)
			if _, err := storetest.NewTicket(t, s, tid, cid, o, store.Limits{}); err != nil {
				t.Fatal(err)
			}
			tids = append(tids, tid)
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, tid := range tids {
		wg.Go(func() {
			<-start
			if err := s.Finish(ctx, tid, storetest.Tail(2), ask.Turn{Question: "q", Outcome: gen.EventTypeAnswer, Text: "42"}); err != nil {
				t.Errorf("end of %s: %v", tid, err)
			}
		})
	}
	close(start)
	wg.Wait()
	for _, tid := range tids {
		if tk, err := s.Ticket(ctx, tid); err != nil || tk.Done == nil || tk.LastSeq != 4 {
			t.Errorf("%s after its end: %+v, %v", tid, tk, err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.errs {
		t.Error(e)
	}
}
