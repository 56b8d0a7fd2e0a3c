package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// finished is a Tickets with one finished ticket.
type finished struct{}

func (finished) Ticket(_ context.Context, id string) (store.Ticket, error) {
	return store.Ticket{ID: id, ConversationID: "c1", LastSeq: 5,
		Terminal: &store.Event{Seq: 4, Type: gen.EventTypeAnswer, Data: []byte(`{"seq":4,"type":"answer","text":"42"}`)},
		Done:     &store.Event{Seq: 5, Type: gen.EventTypeDone, Data: []byte(`{"seq":5,"type":"done","ts":"2026-01-01T00:00:00Z"}`)},
	}, nil
}

// scripted is an in-memory receiver: it verifies each request and answers from a list.
type scripted struct {
	t       *testing.T
	mu      sync.Mutex
	answers []*http.Response
	at      []time.Time
	ids     []string
}

func (s *scripted) RoundTrip(req *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(req.Body)
	req.Header = canonical(req.Header)
	w, _ := standardwebhooks.NewWebhook(testSecret)
	if err := w.Verify(body, req.Header); err != nil {
		s.t.Errorf("attempt does not verify: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = append(s.at, time.Now())
	s.ids = append(s.ids, req.Header.Get("webhook-id"))
	r := &http.Response{StatusCode: http.StatusNoContent, Header: http.Header{}, Body: http.NoBody}
	if len(s.answers) > 0 {
		r, s.answers = s.answers[0], s.answers[1:]
	}
	return r, nil
}

func answer(status int, retryAfter string) *http.Response {
	h := http.Header{}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader("busy"))}
}

// deliver runs a deliverer over one delivery until it is final, and returns it.
func deliver(t *testing.T, cfg Config, rt *scripted, ttl time.Duration) store.Webhook {
	t.Helper()
	ob := store.NewMemoryOutbox()
	cfg.Allow, cfg.Secrets = []string{"https://hooks.example/"}, []string{testSecret}
	d, err := New(Options{Config: cfg, Outbox: ob, Tickets: finished{}, Transport: rt})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := ob.AddWebhook(t.Context(), store.Webhook{Ticket: "t1", ID: "msg_1", URL: "https://hooks.example/a", Due: now, Expires: now.Add(ttl)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	for {
		synctest.Wait()
		w, err := ob.Webhook(t.Context(), "t1")
		if err != nil {
			t.Fatal(err)
		}
		if w.State != gen.WebhookStatePending {
			cancel()
			<-done
			return w
		}
		time.Sleep(time.Second) // fake time: the bubble's clock moves on
	}
}

func TestRetryAfterIsHonouredAndCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &scripted{t: t, answers: []*http.Response{answer(429, "120"), answer(503, "7"), answer(500, "")}}
		w := deliver(t, Config{BaseBackoff: time.Second, MaxBackoff: time.Minute}, rt, time.Hour)
		if w.State != gen.WebhookStateDelivered || w.Attempts != 4 {
			t.Fatalf("delivery %+v, want delivered on the 4th attempt", w)
		}
		gaps := []time.Duration{rt.at[1].Sub(rt.at[0]), rt.at[2].Sub(rt.at[1]), rt.at[3].Sub(rt.at[2])}
		// 429 asked for 120 s: capped at MaxBackoff (60 s). 503 asked for 7 s, more than the
		// second backoff (1–2 s). 500 without Retry-After: the third backoff, 2–4 s. Each plus
		// at most one poll interval.
		within := func(i int, lo, hi time.Duration) {
			if gaps[i] < lo || gaps[i] > hi {
				t.Errorf("gap %d = %v, want %v..%v", i+1, gaps[i], lo, hi)
			}
		}
		within(0, time.Minute, time.Minute+time.Second)
		within(1, 7*time.Second, 8*time.Second)
		within(2, 2*time.Second, 5*time.Second)
		for _, id := range rt.ids {
			if id != "msg_1" {
				t.Errorf("webhook-id %q on a retry, want msg_1", id)
			}
		}
	})
}

// TestRetryAfterOnEveryRetriedStatus: docs/webhooks.md promises a Retry-After is waited at least
// on every answer that is retried (408, 429, 5xx), not only on 429 and 503.
func TestRetryAfterOnEveryRetriedStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &scripted{t: t, answers: []*http.Response{answer(500, "9"), answer(408, "9"), answer(502, "9")}}
		w := deliver(t, Config{BaseBackoff: time.Second, MaxBackoff: time.Minute}, rt, time.Hour)
		if w.State != gen.WebhookStateDelivered || w.Attempts != 4 {
			t.Fatalf("delivery %+v, want delivered on the 4th attempt", w)
		}
		for i := 1; i < len(rt.at); i++ {
			if gap := rt.at[i].Sub(rt.at[i-1]); gap < 9*time.Second || gap > 10*time.Second {
				t.Errorf("gap %d = %v, want the 9 s the receiver asked for", i, gap)
			}
		}
	})
}

func TestAttemptsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var answers []*http.Response
		for range 20 {
			answers = append(answers, answer(503, ""))
		}
		rt := &scripted{t: t, answers: answers}
		w := deliver(t, Config{MaxAttempts: 5, BaseBackoff: time.Second, MaxBackoff: 8 * time.Second}, rt, time.Hour)
		if w.State != gen.WebhookStateFailed || w.Attempts != 5 || len(rt.at) != 5 || w.LastStatus != 503 {
			t.Fatalf("delivery %+v after %d requests, want failed after 5", w, len(rt.at))
		}
		// Exponential: each wait at least half the doubled bound before it.
		for i, lo := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second} {
			if g := rt.at[i+1].Sub(rt.at[i]); g < lo {
				t.Errorf("wait %d = %v, want at least %v", i+1, g, lo)
			}
		}
	})
}

func TestAttemptsStayWithinTheTicketsTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var answers []*http.Response
		for range 20 {
			answers = append(answers, answer(503, "30"))
		}
		rt := &scripted{t: t, answers: answers}
		w := deliver(t, Config{MaxAttempts: 20, MaxBackoff: time.Minute}, rt, 100*time.Second)
		// Retry-After 30 s each time, expiry at 100 s: attempts at 0, 30, 60, 90; the next
		// would be at 120, after expiry.
		if w.State != gen.WebhookStateFailed || len(rt.at) != 4 {
			t.Fatalf("delivery %+v after %d requests, want failed after 4", w, len(rt.at))
		}
	})
}

// endedAt is a Tickets with one ticket finished at a given time (its done's ts).
type endedAt time.Time

func (e endedAt) Ticket(_ context.Context, id string) (store.Ticket, error) {
	ts := time.Time(e).UTC().Format(time.RFC3339Nano)
	return store.Ticket{ID: id, ConversationID: "c1", LastSeq: 5,
		Terminal: &store.Event{Seq: 4, Type: gen.EventTypeAnswer, Data: []byte(`{"seq":4,"type":"answer","text":"42"}`)},
		Done:     &store.Event{Seq: 5, Type: gen.EventTypeDone, Data: []byte(`{"seq":5,"type":"done","ts":"` + ts + `"}`)},
	}, nil
}

// TestAttemptsStopWhereTheTicketExpires: the ticket expires TicketTTL after its done, earlier
// than the delivery's own Expires (set at admission, from the run's deadline); no attempt is
// scheduled after it, so the last one ends the delivery failed (found by an audit: with
// DAS_ASK_TTL_S=8, GET showed pending with a next_attempt_at after the ticket's expiry, and
// the delivery then ended ticket_expired unlogged, its last attempt logged pending).
func TestAttemptsStopWhereTheTicketExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var answers []*http.Response
		for range 20 {
			answers = append(answers, answer(503, "30"))
		}
		rt := &scripted{t: t, answers: answers}
		ob := store.NewMemoryOutbox()
		cfg := Config{Allow: []string{"https://hooks.example/"}, Secrets: []string{testSecret}, MaxAttempts: 20, MaxBackoff: time.Minute}
		now := time.Now()
		d, err := New(Options{Config: cfg, Outbox: ob, Tickets: endedAt(now), Transport: rt, TicketTTL: 100 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := ob.AddWebhook(t.Context(), store.Webhook{Ticket: "t1", ID: "msg_1", URL: "https://hooks.example/a", Due: now, Expires: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); d.Run(ctx) }()
		defer func() { cancel(); <-done }()
		// Retry-After 30 s each time, the ticket gone at 100 s: attempts at 0, 30, 60, 90; the
		// next would be at 120.
		time.Sleep(95 * time.Second)
		synctest.Wait()
		w, err := ob.Webhook(t.Context(), "t1")
		if err != nil {
			t.Fatal(err)
		}
		if w.State != gen.WebhookStateFailed || len(rt.at) != 4 {
			t.Fatalf("delivery %+v after %d requests, want failed after 4", w, len(rt.at))
		}
	})
}

// runWith starts a Deliverer of opts with the one delivery w in its outbox (a ticket t1, due
// now), and returns its stop: Run's context cancelled and Run returned.
func runWith(t *testing.T, opts Options, w store.Webhook) (stop func()) {
	t.Helper()
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := opts.Outbox.AddWebhook(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	return func() { cancel(); <-done }
}

// hook is the one delivery runWith's tests add: ticket t1's, due at now, expiring an hour later.
func hook(now time.Time) store.Webhook {
	return store.Webhook{Ticket: "t1", ID: "msg_1", URL: "https://hooks.example/a", Due: now, Expires: now.Add(time.Hour)}
}

// gone is a Tickets that holds no ticket (each has expired).
type gone struct{}

func (gone) Ticket(context.Context, string) (store.Ticket, error) {
	return store.Ticket{}, store.ErrNotFound
}

// TestDeliveryKeptNoLongerThanItsTicket: a delivery's own Expires is set at admission, a run's
// deadline and a margin ahead of any end; once an attempt knows the run's end, the delivery is
// kept only as long as its ticket (TTL after its done), and one whose ticket has gone is
// forgotten with it (found by an audit: a delivered record, the receiver's URL in it, outlived
// its ticket by up to 140 s on Redis).
func TestDeliveryKeptNoLongerThanItsTicket(t *testing.T) {
	for name, tc := range map[string]struct {
		tickets Tickets
		state   gen.WebhookState
		kept    time.Duration // after the attempt; the ticket ended at the attempt
	}{
		"delivered":      {endedAt(time.Time{}), gen.WebhookStateDelivered, 100 * time.Second},
		"ticket expired": {gone{}, gen.WebhookStateFailed, 0},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := &scripted{t: t, answers: []*http.Response{answer(204, "")}}
				ob := store.NewMemoryOutbox()
				cfg := Config{Allow: []string{"https://hooks.example/"}, Secrets: []string{testSecret}}
				now := time.Now()
				tickets := tc.tickets
				if _, ok := tickets.(endedAt); ok {
					tickets = endedAt(now)
				}
				defer runWith(t, Options{Config: cfg, Outbox: ob, Tickets: tickets, Transport: rt, TicketTTL: 100 * time.Second}, hook(now))()
				synctest.Wait()
				if tc.kept > 0 {
					w, err := ob.Webhook(t.Context(), "t1")
					if err != nil || w.State != tc.state || !w.Expires.Equal(now.Add(tc.kept)) {
						t.Fatalf("after the attempt: %+v, %v; want %s, expiring with its ticket at %v", w, err, tc.state, now.Add(tc.kept))
					}
					time.Sleep(tc.kept)
				}
				if w, err := ob.Webhook(t.Context(), "t1"); !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("once its ticket is gone: %+v, %v; want the delivery gone too", w, err)
				}
			})
		})
	}
}

// running is a Tickets whose ticket has not ended.
type running struct{}

func (running) Ticket(_ context.Context, id string) (store.Ticket, error) {
	return store.Ticket{ID: id, ConversationID: "c1", LastSeq: 2}, nil
}

// expiriesSent is an outbox that keeps the Expires each record sends.
type expiriesSent struct {
	*store.MemoryOutbox
	mu   sync.Mutex
	sent []time.Time
}

func (o *expiriesSent) RecordWebhook(ctx context.Context, holder string, w store.Webhook) error {
	o.mu.Lock()
	o.sent = append(o.sent, w.Expires)
	o.mu.Unlock()
	return o.MemoryOutbox.RecordWebhook(ctx, holder, w)
}

// TestRecordSendsAnExpiryOnlyToBringItForward: a record sends an expiry only when it is sooner
// than the delivery's own (its ticket's, once the run's end is known). The delivery's own,
// read back from the store and sent again, would move by the clocks' skew at every record on
// Redis (times go as offsets from the caller's clock): a delivery re-recorded every 5 s while
// its run went on, or retried, came earlier each time (found by a review: a minute of skew, a
// minute earlier per record).
func TestRecordSendsAnExpiryOnlyToBringItForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ob := &expiriesSent{MemoryOutbox: store.NewMemoryOutbox()}
		cfg := Config{Allow: []string{"https://hooks.example/"}, Secrets: []string{testSecret}}
		now := time.Now()
		rt := &scripted{t: t, answers: []*http.Response{answer(204, "")}}
		defer runWith(t, Options{Config: cfg, Outbox: ob, Tickets: running{}, Transport: rt, TicketTTL: 100 * time.Second}, hook(now))()
		// The run goes on: looked at again every notFinishedRetry, three times.
		time.Sleep(3*notFinishedRetry + time.Second)
		synctest.Wait()
		ob.mu.Lock()
		sent := slices.Clone(ob.sent)
		ob.mu.Unlock()
		if len(sent) < 3 {
			t.Fatalf("%d records while the run went on, want at least 3", len(sent))
		}
		for i, e := range sent {
			if !e.IsZero() {
				t.Errorf("record %d sent the expiry %v, where nothing brought it forward", i+1, e)
			}
		}
		if w, err := ob.Webhook(t.Context(), "t1"); err != nil || !w.Expires.Equal(now.Add(time.Hour)) {
			t.Errorf("after the records: %+v, %v; want the delivery's own expiry kept", w, err)
		}
	})
}

// lostReply is an outbox whose record is applied and then answered ErrNotFound, as a script
// go-redis ran again after a lost reply answers when the first run let the delivery expire.
type lostReply struct{ *store.MemoryOutbox }

func (o lostReply) RecordWebhook(ctx context.Context, holder string, w store.Webhook) error {
	if err := o.MemoryOutbox.RecordWebhook(ctx, holder, w); err != nil {
		return err
	}
	return store.ErrNotFound
}

// ends counts the deliveries' ends an Observer is told of.
type ends struct{ n atomic.Int32 }

func (*ends) Attempted(string, int, time.Duration)         {}
func (e *ends) Ended(gen.WebhookState, int, time.Duration) { e.n.Add(1) }

// TestRecordOfAGoneTicketRetriedIsRecorded: the record that ends a delivery whose ticket is gone
// lets it expire at once; that record run again after a lost reply finds nothing, and is
// recorded all the same (its end reported), not logged as not recorded (found by a review).
func TestRecordOfAGoneTicketRetriedIsRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ob := lostReply{store.NewMemoryOutbox()}
		obs := &ends{}
		cfg := Config{Allow: []string{"https://hooks.example/"}, Secrets: []string{testSecret}}
		now := time.Now()
		defer runWith(t, Options{Config: cfg, Outbox: ob, Tickets: gone{}, Transport: &scripted{t: t}, TicketTTL: 100 * time.Second, Observer: obs}, hook(now))()
		synctest.Wait()
		if n := obs.n.Load(); n != 1 {
			t.Errorf("%d ends reported, want the one of the delivery whose ticket is gone", n)
		}
	})
}

func TestBackoffShape(t *testing.T) {
	c := Config{BaseBackoff: time.Second, MaxBackoff: 10 * time.Second}
	for n, hi := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 40: 10 * time.Second} {
		for range 200 {
			if d := backoff(c, n, 0); d < hi/2 || d > hi {
				t.Fatalf("backoff(%d) = %v, want %v..%v", n, d, hi/2, hi)
			}
		}
	}
	if d := backoff(c, 1, time.Hour); d != 10*time.Second {
		t.Errorf("Retry-After of an hour: waited %v, want the 10s cap", d)
	}
}

// hanging is a receiver that never answers /slow (the attempt ends at its timeout) and answers
// anything else at once.
type hanging struct{}

func (hanging) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/slow") {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return &http.Response{StatusCode: http.StatusNoContent, Header: http.Header{}, Body: http.NoBody}, nil
}

// TestSlowReceiverHoldsOneSlot: a receiver that hangs for its whole timeout holds one attempt,
// not the deliveries that come due while it hangs (found by an audit: every delivery waited for
// the slowest attempt of the batch claimed before it, up to the 10 s timeout).
func TestSlowReceiverHoldsOneSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ob := store.NewMemoryOutbox()
		d, err := New(Options{Config: Config{Allow: []string{"https://hooks.example/"}, Secrets: []string{testSecret}, Timeout: 10 * time.Second},
			Outbox: ob, Tickets: finished{}, Transport: hanging{}})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := ob.AddWebhook(t.Context(), store.Webhook{Ticket: "t1", ID: "msg_1", URL: "https://hooks.example/slow", Due: start, Expires: start.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); d.Run(ctx) }()
		defer func() { cancel(); <-done }()
		synctest.Wait() // the slow attempt is in flight

		if err := ob.AddWebhook(t.Context(), store.Webhook{Ticket: "t2", ID: "msg_2", URL: "https://hooks.example/fast", Due: start.Add(time.Hour), Expires: start.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		d.Due(t.Context(), "t2") // its run ended
		synctest.Wait()
		w, err := ob.Webhook(t.Context(), "t2")
		if err != nil {
			t.Fatal(err)
		}
		if w.State != gen.WebhookStateDelivered || time.Since(start) >= 10*time.Second {
			t.Errorf("the delivery that came due behind a hanging one: %s after %v, want delivered at once", w.State, time.Since(start))
		}
		if slow, _ := ob.Webhook(t.Context(), "t1"); slow.Attempts != 0 {
			t.Errorf("the hanging delivery: %d attempts recorded, want its one still in flight", slow.Attempts)
		}
	})
}

// TestRetryComesDueWhileAnotherHangs: a retry whose time comes while another delivery's attempt
// hangs is made at its time (within a Poll), not once the hanging attempt ends (found by an
// audit: askd retried a 503 eight seconds after its next_attempt_at, when a receiver elsewhere
// hung for the 10 s timeout; only a run's end woke the round, not the clock).
func TestRetryComesDueWhileAnotherHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ob := store.NewMemoryOutbox()
		d, err := New(Options{Config: Config{Allow: []string{"https://hooks.example/"}, Secrets: []string{testSecret}, Timeout: 10 * time.Second},
			Outbox: ob, Tickets: finished{}, Transport: hanging{}})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := ob.AddWebhook(t.Context(), store.Webhook{Ticket: "t1", ID: "msg_1", URL: "https://hooks.example/slow", Due: start, Expires: start.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		// A retry, due in 2 s by the clock: nothing calls Due for it.
		if err := ob.AddWebhook(t.Context(), store.Webhook{Ticket: "t2", ID: "msg_2", URL: "https://hooks.example/fast", Attempts: 1, Due: start.Add(2 * time.Second), Expires: start.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); d.Run(ctx) }()
		defer func() { cancel(); <-done }()
		synctest.Wait() // the slow attempt is in flight

		time.Sleep(2*time.Second + DefaultPoll)
		synctest.Wait()
		w, err := ob.Webhook(t.Context(), "t2")
		if err != nil {
			t.Fatal(err)
		}
		if w.State != gen.WebhookStateDelivered {
			t.Errorf("the retry due at 2 s, %v in, while another attempt hangs: %s after %d attempts, want delivered", time.Since(start), w.State, w.Attempts)
		}
	})
}

// counting wraps hanging and counts the attempts it holds at once.
type counting struct {
	mu             sync.Mutex
	inflight, most int
}

func (c *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.inflight++
	c.most = max(c.most, c.inflight)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inflight--
		c.mu.Unlock()
	}()
	return hanging{}.RoundTrip(req)
}

// TestRoundKeepsAtMostABatchInFlight: a round keeps claimBatch attempts in flight and no more,
// however many deliveries are due: when one ends it claims one more, and the rest stay due
// (unclaimed, so another replica's deliverer may take them) until a slot frees.
func TestRoundKeepsAtMostABatchInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ob := store.NewMemoryOutbox()
		rcv := &counting{}
		d, err := New(Options{Config: Config{Allow: []string{"https://hooks.example/"}, Secrets: []string{testSecret}, Timeout: 10 * time.Second},
			Outbox: ob, Tickets: finished{}, Transport: rcv})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		add := func(id, path string, due time.Time) {
			t.Helper()
			if err := ob.AddWebhook(t.Context(), store.Webhook{Ticket: id, ID: "msg_" + id, URL: "https://hooks.example/" + path, Due: due, Expires: start.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
		// Claimed first (the earliest due): one receiver that answers at once, and claimBatch-1
		// that hang; then 8 more that hang, due behind them.
		add("fast", "fast", start.Add(-time.Second))
		for i := range claimBatch - 1 {
			add("a"+strconv.Itoa(i), "slow", start.Add(-time.Millisecond))
		}
		const behind = 8
		for i := range behind {
			add("b"+strconv.Itoa(i), "slow", start)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); d.Run(ctx) }()
		defer func() { cancel(); <-done }()
		synctest.Wait()
		rcv.mu.Lock()
		inflight, most := rcv.inflight, rcv.most
		rcv.mu.Unlock()
		if inflight != claimBatch || most != claimBatch {
			t.Errorf("%d deliveries due: %d attempts in flight (at most %d), want %d", claimBatch+behind, inflight, most, claimBatch)
		}
		// Another deliverer may take what this round has no slot for.
		if other, err := ob.ClaimWebhooks(t.Context(), "another", time.Minute, 100); err != nil || len(other) != behind-1 {
			t.Errorf("another deliverer claimed %d (%v), want the %d this round left due", len(other), err, behind-1)
		}
	})
}

// TestDestinationDroppedFromTheAllowList: a delivery registered while its URL was allowed, and
// due after the operator dropped that prefix (a restart or another replica with new settings,
// over the same outbox), is never sent: it fails unsent with not_allowed. Before, only createAsk
// checked the allow-list, and the deliverer POSTed to whatever the outbox held.
func TestDestinationDroppedFromTheAllowList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &scripted{t: t}
		ob := store.NewMemoryOutbox()
		d, err := New(Options{Config: Config{Allow: []string{"https://hooks.example/kept/"}, Secrets: []string{testSecret}},
			Outbox: ob, Tickets: finished{}, Transport: rt})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		for _, w := range []store.Webhook{
			{Ticket: "t1", ID: "msg_1", URL: "https://hooks.example/dropped/a", Due: now, Expires: now.Add(time.Hour)},
			{Ticket: "t2", ID: "msg_2", URL: "https://hooks.example/kept/a", Due: now, Expires: now.Add(time.Hour)},
		} {
			if err := ob.AddWebhook(t.Context(), w); err != nil {
				t.Fatal(err)
			}
		}
		d.Drain(t.Context())
		if w, _ := ob.Webhook(t.Context(), "t1"); w.State != gen.WebhookStateFailed || w.LastError != "not_allowed" || w.Attempts != 0 {
			t.Errorf("delivery to a dropped prefix: %+v, want failed with not_allowed and no attempt", w)
		}
		if w, _ := ob.Webhook(t.Context(), "t2"); w.State != gen.WebhookStateDelivered {
			t.Errorf("delivery to a kept prefix: %+v, want delivered", w)
		}
		if len(rt.ids) != 1 || rt.ids[0] != "msg_2" {
			t.Errorf("requests made: %v, want only msg_2's", rt.ids)
		}
	})
}

// TestRetryWindowAsDocumented holds docs/webhooks.md's "Retries" to the backoff: with the
// default settings the waits between the 12 attempts add up to 9–19 minutes, about the default
// TTL, the 5 min cap first shortens the wait before the 11th attempt, and 8 attempts wait
// 64–127 s in all.
func TestRetryWindowAsDocumented(t *testing.T) {
	c := Config{}.withDefaults()
	// bound is the upper bound of the wait after n attempts, uncapped and capped.
	bound := func(n int) (time.Duration, time.Duration) {
		exp := c.BaseBackoff
		for i := 1; i < n; i++ {
			exp *= 2
		}
		return exp, min(exp, c.MaxBackoff)
	}
	window := func(attempts int) (lo, hi time.Duration) {
		for n := 1; n < attempts; n++ {
			_, exp := bound(n)
			lo, hi = lo+exp/2, hi+exp
			for range 50 {
				if d := backoff(c, n, 0); d < exp/2 || d > exp {
					t.Fatalf("backoff(%d) = %v, outside %v..%v", n, d, exp/2, exp)
				}
			}
		}
		return lo, hi
	}
	if lo, hi := window(8); lo.Round(time.Second) != 64*time.Second || hi != 127*time.Second {
		t.Errorf("8 attempts: %v..%v, docs say 64–127 s", lo, hi)
	}
	if lo, hi := window(c.MaxAttempts); lo.Round(time.Minute) != 9*time.Minute || hi.Round(time.Minute) != 19*time.Minute {
		t.Errorf("default window (%d attempts) %v..%v, docs say 9–19 minutes", c.MaxAttempts, lo, hi)
	}
	if raw, capped := bound(9); raw != capped {
		t.Errorf("the wait before the 10th attempt is capped (%v to %v); docs say the 11th is the first", raw, capped)
	}
	if raw, capped := bound(10); raw == capped {
		t.Errorf("the wait before the 11th attempt is not capped (%v); docs say it is the first", raw)
	}
}

// TestGoneStopsThatTicketOnly: docs/webhooks.md says a receiver's 410 ends that ticket's
// delivery only; the next ask naming the same URL is delivered to it.
func TestGoneStopsThatTicketOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &scripted{t: t, answers: []*http.Response{answer(http.StatusGone, "")}}
		ob := store.NewMemoryOutbox()
		d, err := New(Options{Config: Config{Allow: []string{"https://hooks.example/"}, Secrets: []string{testSecret}},
			Outbox: ob, Tickets: finished{}, Transport: rt})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); d.Run(ctx) }()
		defer func() { cancel(); <-done }()
		final := func(ticket string) store.Webhook {
			t.Helper()
			now := time.Now()
			if err := ob.AddWebhook(t.Context(), store.Webhook{Ticket: ticket, ID: "msg_" + ticket, URL: "https://hooks.example/a", Due: now, Expires: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			d.Due(t.Context(), ticket) // the run has ended, as the service says
			for {
				synctest.Wait()
				w, err := ob.Webhook(t.Context(), ticket)
				if err != nil {
					t.Fatal(err)
				}
				if w.State != gen.WebhookStatePending {
					return w
				}
				time.Sleep(time.Second) // fake time: the bubble's clock moves on
			}
		}
		if w := final("t1"); w.State != gen.WebhookStateFailed || w.Attempts != 1 || w.LastStatus != http.StatusGone {
			t.Fatalf("the first ask's delivery %+v, want failed at its one attempt's 410", w)
		}
		if w := final("t2"); w.State != gen.WebhookStateDelivered || w.Attempts != 1 {
			t.Errorf("the next ask to the same URL: %+v, want delivered", w)
		}
		if len(rt.ids) != 2 || rt.ids[1] != "msg_t2" {
			t.Errorf("attempts %q, want msg_t1 then msg_t2", rt.ids)
		}
	})
}

// TestRetryAtItsOwnTime: a retry is made at the time its backoff gave, not at the first Poll
// after it, so backoff's jitter is what spreads retries out. With a Poll of a minute, every gap
// is within its backoff's range (the first retry 0.5–1 s, then 1–2 s, 2–4 s, 4–8 s); waking on
// Poll ticks alone, each gap was a minute.
func TestRetryAtItsOwnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &scripted{t: t, answers: []*http.Response{answer(500, ""), answer(500, ""), answer(500, ""), answer(500, "")}}
		w := deliver(t, Config{BaseBackoff: time.Second, MaxBackoff: 8 * time.Second, Poll: time.Minute}, rt, time.Hour)
		if w.State != gen.WebhookStateDelivered || w.Attempts != 5 {
			t.Fatalf("delivery %+v, want delivered on the 5th attempt", w)
		}
		for i, hi := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
			if gap := rt.at[i+1].Sub(rt.at[i]); gap < hi/2 || gap > hi {
				t.Errorf("gap %d = %v, want %v..%v", i+1, gap, hi/2, hi)
			}
		}
	})
}

// TestRetriesOfManyDeliveriesSpreadOut: eight deliveries that fail together are retried at
// eight different times across their backoff's range (found by an audit: with the default 1 s
// Poll they were retried on two or three shared instants, the jitter rounded up to Poll ticks).
func TestRetriesOfManyDeliveriesSpreadOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 8
		rt := &scripted{t: t}
		for range n {
			rt.answers = append(rt.answers, answer(503, ""))
		}
		ob := store.NewMemoryOutbox()
		d, err := New(Options{Config: Config{Allow: []string{"https://hooks.example/"}, Secrets: []string{testSecret}, BaseBackoff: 4 * time.Second},
			Outbox: ob, Tickets: finished{}, Transport: rt})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for i := range n {
			id := fmt.Sprint("t", i)
			if err := ob.AddWebhook(t.Context(), store.Webhook{Ticket: id, ID: "msg_" + id, URL: "https://hooks.example/a", Due: start, Expires: start.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); d.Run(ctx) }()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		cancel()
		<-done
		rt.mu.Lock()
		defer rt.mu.Unlock()
		if len(rt.at) != 2*n {
			t.Fatalf("%d attempts, want %d (each delivery failed once, then delivered)", len(rt.at), 2*n)
		}
		retried := map[time.Duration]bool{}
		for _, at := range rt.at[n:] {
			gap := at.Sub(start)
			if gap < 2*time.Second || gap > 4*time.Second {
				t.Errorf("a retry %v after the first attempts, want 2s..4s (the first backoff's range)", gap)
			}
			retried[gap] = true
		}
		if len(retried) < n {
			t.Errorf("the %d retries came at %d distinct times, want %d: %v", n, len(retried), n, rt.at[n:])
		}
	})
}
