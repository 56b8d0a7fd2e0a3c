package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/internal/faultproxy"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// proxiedStore opens a replica's store whose every connection to srv passes through a fault
// proxy, with short client timeouts so that a stalled Redis is noticed quickly.
func proxiedStore(t *testing.T, srv *redistest.Server, prefix string, lease time.Duration) (*redisstore.Store, *faultproxy.Proxy) {
	t.Helper()
	p, err := faultproxy.New(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	rc := goredis.NewClient(&goredis.Options{Addr: p.Addr(), ReadTimeout: 250 * time.Millisecond, WriteTimeout: 250 * time.Millisecond,
		DialTimeout: 250 * time.Millisecond})
	t.Cleanup(func() { _ = rc.Close() })
	s, err := redisstore.New(t.Context(), redisstore.Options{Client: rc, Prefix: prefix, Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, p
}

// phasedRunner emits a milestone and `before` steps, says so on mid, waits for go, emits
// `after` steps and a milestone, and answers.
func phasedRunner(before, after int, mid chan<- string, resume <-chan struct{}) ask.Runner {
	return ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseGrounding, Subject: "incident", Source: "demo"})
		for i := range before {
			emit.Step(step(i))
		}
		mid <- req.Ticket
		<-resume
		for i := range after {
			emit.Step(step(before + i))
		}
		emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseQuerying, Subject: "incident", Source: "demo"})
		emit.ModelCall(ask.Usage{InputTokens: 1, OutputTokens: 1})
		return ask.Outcome{Answer: answer("42")}
	})
}

// checkPhasedRun checks an answered log of phasedRunner(3, 4, …) run on h: every step it
// wrote (done.steps agreeing), both milestones, and no event h dropped.
func checkPhasedRun(t *testing.T, frames []frame, done envelopeJSON, h *harness) {
	t.Helper()
	if got := countTypes(frames, "step"); got != 7 || done.Steps != 7 {
		t.Errorf("%d steps in the log, done.steps = %d; want 7 and 7: %v", got, done.Steps, types(frames))
	}
	if got := countTypes(frames, "milestone"); got != 2 {
		t.Errorf("%d milestones, want 2: %v", got, types(frames))
	}
	if strings.Contains(h.logs.String(), "not appended") {
		t.Errorf("an event was dropped: %s", h.logs.String())
	}
}

// countTypes counts the frames of type typ.
func countTypes(frames []frame, typ string) int {
	n := 0
	for _, f := range frames {
		if f.Event == typ {
			n++
		}
	}
	return n
}

// TestNoEventLostWhileStoreAway: the store stops answering in the middle of a run (a stalled
// network, then Redis paused with CLIENT PAUSE), for less than the lease. The run holds its
// events and writes them when the store is back: every event arrives, seq has no gap, both
// milestones are there, done.steps is the steps in the log, and the ask is answered.
func TestNoEventLostWhileStoreAway(t *testing.T) {
	srv := redistest.Start(t)
	for _, fault := range []string{"stall", "client-pause"} {
		t.Run(fault, func(t *testing.T) {
			prefix := "away:" + rand.Text() + ":"
			mid, resume := make(chan string, 1), make(chan struct{})
			st, p := proxiedStore(t, srv, prefix, 5*time.Second)
			a := newHarness(t, server.Options{Store: st, Runner: phasedRunner(3, 4, mid, resume)})
			b := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, 0)}) // a reader beside the fault

			ticket := a.ask(alice, a.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
			within(t, mid, "the run's first steps")
			switch fault {
			case "stall":
				p.Stall()
			case "client-pause":
				if err := raw(t, srv).Do(t.Context(), "CLIENT", "PAUSE", "1500", "ALL").Err(); err != nil {
					t.Fatal(err)
				}
			}
			accepted := p.Stats().Accepted
			close(resume)
			if fault == "stall" {
				// The store stays away until the run's writes have timed out and been retried
				// on fresh connections (go-redis reconnects after each timeout) a few times.
				wctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				err := p.WaitStats(wctx, func(st faultproxy.Stats) bool { return st.Held > 0 && st.Accepted >= accepted+3 })
				cancel()
				if err != nil {
					t.Fatalf("the run's writes failing against the stalled store: %v (%+v)", err, p.Stats())
				}
				p.Pass()
			}
			frames := b.events(alice, ticket)
			_, done := checkLifecycle(t, frames, gen.EventTypeAnswer)
			checkPhasedRun(t, frames, done, a)
		})
	}
}

// raw is a plain client to srv, not through any proxy.
func raw(t *testing.T, srv *redistest.Server) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestLostRepliesDuringRun: the replies to an append and to the end are lost (the scripts ran;
// go-redis and the run write again): the ask is answered, not interrupted, and the log holds
// each event once.
func TestLostRepliesDuringRun(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "lost:" + rand.Text() + ":"
	st, p := proxiedStore(t, srv, prefix, 5*time.Second)
	p.DropReplies(1, `"call_id":"call-1"`, faultproxy.Close)
	p.DropReplies(1, `"type":"done"`, faultproxy.Stall)
	a := newHarness(t, server.Options{Store: st, Runner: answerRunner(3)})
	ticket := a.ask(alice, a.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	frames := a.events(alice, ticket)
	_, done := checkLifecycle(t, frames, gen.EventTypeAnswer)
	if done.Steps != 3 || countTypes(frames, "step") != 3 {
		t.Errorf("done.steps = %d with %d steps in the log, want 3 and 3", done.Steps, countTypes(frames, "step"))
	}
	if got := p.Stats().RepliesDropped; got != 2 {
		t.Errorf("the proxy dropped %d replies, want 2 (the step's append and the end)", got)
	}
}

// TestStoreAwayPastLease: the store stays away longer than the lease. The run stops (its
// runner is cancelled), and once the store is back the ask ends error{interrupted} + done,
// gap-free, with done.steps the steps the log holds.
func TestStoreAwayPastLease(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "past:" + rand.Text() + ":"
	lease := 600 * time.Millisecond
	mid, resume, stopped := make(chan string, 1), make(chan struct{}), make(chan string, 1)
	st, p := proxiedStore(t, srv, prefix, lease)
	runner := stoppingRunner(mid, resume, stopped)
	a := newHarness(t, server.Options{Store: st, Runner: runner})
	b := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, lease)})
	ticket := a.ask(alice, a.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	within(t, mid, "the run's first steps")
	p.Refuse()
	close(resume)
	within(t, stopped, "the run stopping once the store stayed away past the lease")
	p.Pass()
	frames := b.events(alice, ticket)
	terminal, done := checkLifecycle(t, frames, gen.EventTypeError)
	if terminal.Kind != string(gen.ErrorKindInterrupted) {
		t.Errorf("terminal kind %q, want interrupted", terminal.Kind)
	}
	if got := int64(countTypes(frames, "step")); done.Steps != got {
		t.Errorf("done.steps = %d, want the %d steps in the log", done.Steps, got)
	}
}

// stoppingRunner is phasedRunner(2, 1, …) that, once it has its outcome, waits for its context
// to end (the run given up) and says so on stopped.
func stoppingRunner(mid chan<- string, resume <-chan struct{}, stopped chan<- string) ask.Runner {
	return ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
		out := phasedRunner(2, 1, mid, resume).Run(ctx, req, emit)
		<-ctx.Done()
		stopped <- req.Ticket
		return out
	})
}

// TestStoreUnavailable503: with the store unreachable every call answers 503 problem+json with
// Retry-After, never 500; a caller that goes away meanwhile is not an error.
func TestStoreUnavailable503(t *testing.T) {
	srv := redistest.Start(t)
	st, p := proxiedStore(t, srv, "down:"+rand.Text()+":", 0)
	h := newHarness(t, server.Options{Store: st})
	cid := h.conv(alice)
	ticket := h.ask(alice, cid, "How many sev1 incidents did we have in 2026-Q2?")
	_ = h.events(alice, ticket)
	p.Refuse()
	ctx := t.Context()
	check := func(what string, status int, hdr http.Header, ct string, body []byte) {
		t.Helper()
		pr := problemOf(t, status, ct, body, http.StatusServiceUnavailable)
		if hdr.Get("Retry-After") == "" {
			t.Errorf("%s: 503 without Retry-After", what)
		}
		if pr.Detail == nil || strings.Contains(*pr.Detail, "internal") {
			t.Errorf("%s: detail %v", what, pr.Detail)
		}
	}
	if r, err := h.cw.CreateConversationWithResponse(ctx, nil, gen.CreateConversationRequest{}, bearer(alice)); err != nil {
		t.Fatal(err)
	} else {
		check("createConversation", r.StatusCode(), r.HTTPResponse.Header, r.HTTPResponse.Header.Get("Content-Type"), r.Body)
	}
	ra := h.askRaw(alice, cid, "And in 2026-Q3?")
	check("createAsk", ra.StatusCode(), ra.HTTPResponse.Header, ra.HTTPResponse.Header.Get("Content-Type"), ra.Body)
	r := h.status(alice, ticket)
	check("getAsk", r.StatusCode(), r.HTTPResponse.Header, r.HTTPResponse.Header.Get("Content-Type"), r.Body)
	c := h.cancel(alice, ticket)
	check("cancelAsk", c.StatusCode(), c.HTTPResponse.Header, c.HTTPResponse.Header.Get("Content-Type"), c.Body)
	resp := h.stream(ctx, alice, ticket, nil)
	check("streamEvents", resp.StatusCode, resp.Header, resp.Header.Get("Content-Type"), readBody(t, resp))

	// A caller that leaves while the store is stalled: no ERROR line, no 500.
	p.Stall()
	gone, leave := context.WithCancel(t.Context())
	req := httptest.NewRequestWithContext(gone, http.MethodGet, "/ask/v1/asks/"+ticket, nil)
	req.Header.Set("Authorization", "Bearer "+alice)
	rec := httptest.NewRecorder()
	time.AfterFunc(50*time.Millisecond, leave)
	h.srv.Handler().ServeHTTP(rec, req)
	if rec.Code == http.StatusInternalServerError || rec.Code < 400 {
		t.Errorf("a caller gone mid-request: %d, want no 500", rec.Code)
	}
	if logs := h.logs.String(); strings.Contains(logs, `"level":"ERROR"`) {
		t.Errorf("an ERROR was logged: %s", logs)
	}
	p.Pass()
	if r := h.status(alice, ticket); r.StatusCode() != http.StatusOK {
		t.Errorf("status once the store is back: %d", r.StatusCode())
	}
}

// TestRestartWhileAwayPastLease: the store stays away past the lease while an ask runs, so
// its runner gives the run up; then Redis comes back restarted in the memory-only mode, every
// key gone. The runner, which kept waiting for the store, finds the ticket gone and restores
// it ended error{interrupted} + done after every seq it assigned: the ticket a client holds
// never vanishes, however long the store was away (found by a black-box audit: it answered
// 404 "lost" for good).
func TestRestartWhileAwayPastLease(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "awaywiped:" + rand.Text() + ":"
	lease := 600 * time.Millisecond
	mid, resume, stopped := make(chan string, 1), make(chan struct{}), make(chan string, 1)
	st, p := proxiedStore(t, srv, prefix, lease)
	runner := stoppingRunner(mid, resume, stopped)
	ended := make(chan server.End, 1)
	a := newHarness(t, server.Options{Store: st, Runner: runner, Hooks: server.Hooks{Ended: func(_ string, e server.End) { ended <- e }}})
	ticket := a.ask(alice, a.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	within(t, mid, "the run's first steps")
	seen := a.status(alice, ticket).JSON200.LastSeq
	p.Refuse()
	close(resume)
	within(t, stopped, "the run stopping once the store stayed away past the lease")
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.Pass()
	select {
	case e := <-ended:
		if !e.Restored || e.Outcome != gen.EventTypeError || e.Error == nil || e.Error.Kind != gen.ErrorKindInterrupted {
			t.Errorf("the run's end %+v, want it restored, ended error{interrupted}", e)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the lost ask was not ended within 20s of the store's return")
	}
	r := a.status(alice, ticket)
	if r.StatusCode() != http.StatusOK || r.JSON200 == nil || r.JSON200.State != gen.AskStateError {
		t.Fatalf("the ticket after the store's return: %d %s, want state error", r.StatusCode(), r.Body)
	}
	b := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, lease)})
	frames := b.events(alice, ticket)
	if n := len(frames); n < 3 || frames[0].Event != "accepted" || frames[n-2].Event != "error" || frames[n-1].Event != "done" {
		t.Fatalf("restored log %v, want accepted … error, done", types(frames))
	}
	if e := decode(t, frames[len(frames)-2]); e.Kind != string(gen.ErrorKindInterrupted) || e.Seq <= seen {
		t.Errorf("terminal %s at seq %d, want interrupted after seq %d (the last a client saw)", e.Kind, e.Seq, seen)
	}
	// The ticket was re-created from what was admitted, the supervisor branch's open (seq 2,
	// written with accepted) included: the restored end closes a branch the log opens.
	checkRestored(t, frames, seen)
	if e := decode(t, frames[1]); e.Seq != 2 || e.Type != string(gen.EventTypeBranch) || e.Role != "supervisor" || e.State != "open" {
		t.Errorf("restored log %v: its second event is seq %d %s %s/%s, want seq 2, the supervisor branch's open (admitted with accepted)",
			types(frames), e.Seq, e.Type, e.Role, e.State)
	}
	if r := b.status(bob, ticket); r.StatusCode() != http.StatusNotFound {
		t.Errorf("another identity reads the restored ticket: %d", r.StatusCode())
	}
}

// streamResult is a stream's status and whole body.
type streamResult struct {
	status int
	body   []byte
}

// reconnect opens alice's stream of ticket with Last-Event-ID seen, in the background, and
// answers its status and whole body once it ends.
func (h *harness) reconnect(t *testing.T, ticket string, seen int64) <-chan streamResult {
	got := make(chan streamResult, 1)
	go func() {
		last := strconv.FormatInt(seen, 10)
		resp := h.stream(t.Context(), alice, ticket, &gen.StreamEventsParams{LastEventID: &last})
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		got <- streamResult{status: resp.StatusCode, body: body}
	}()
	return got
}

// ticketSignal is a replica's store that says on seen when a Ticket read answers what when
// looks for.
type ticketSignal struct {
	*redisstore.Store
	when func(store.Ticket, error) bool
	seen chan struct{}
}

func (s *ticketSignal) Ticket(ctx context.Context, id string) (store.Ticket, error) {
	t, err := s.Store.Ticket(ctx, id)
	if s.when(t, err) {
		select {
		case s.seen <- struct{}{}:
		default:
		}
	}
	return t, err
}

// TestReconnectWhileARunningAskIsRestored: Redis restarts without persistence while an ask
// runs; a reader whose stream reconnects (Last-Event-ID) before the ask's replica has noticed
// and re-created the ticket, ended (run.restoreVia: at its next write or lease check), gets that
// end, as a stream that stayed open does (follow waits for a vanished ticket), not a final 404
// "lost: ask again" for a ticket that reappears a moment later: the Go client stops at a 404,
// so it never learnt how the ask ended, and "a ticket whose 202 was sent never vanishes"
// (docs/scale-out.md) did not hold for it.
func TestReconnectWhileARunningAskIsRestored(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "reconnect:" + rand.Text() + ":"
	mid, resume := make(chan string, 1), make(chan struct{})
	st, p := proxiedStore(t, srv, prefix, time.Minute)
	a := newHarness(t, server.Options{Store: st, Runner: phasedRunner(2, 1, mid, resume)})
	ticket := a.ask(alice, a.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	within(t, mid, "the run's first steps")
	seen := a.status(alice, ticket).JSON200.LastSeq

	// The runner's replica is cut off while Redis restarts empty, so it cannot notice yet.
	p.Refuse()
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	bs := &ticketSignal{Store: replicaStore(t, srv, prefix, time.Minute), seen: make(chan struct{}, 1),
		when: func(_ store.Ticket, err error) bool { return errors.Is(err, store.ErrNotFound) }}
	b := newHarness(t, server.Options{Store: bs})
	got := b.reconnect(t, ticket, seen)
	select {
	case <-bs.seen: // the reconnect found the ticket gone
	case <-time.After(10 * time.Second):
		t.Fatal("the reconnect did not read the ticket within 10s")
	}
	// Now the runner's replica reaches Redis again, finds its ticket gone at its next write
	// and re-creates it, ended.
	p.Pass()
	close(resume)
	var r streamResult
	select {
	case r = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the reconnected stream did not end within 20s")
	}
	if r.status != http.StatusOK {
		t.Fatalf("a stream reconnecting while its running ask was being restored: %d, want the restored end", r.status)
	}
	frames := readAll(t, bytes.NewReader(r.body))
	if n := len(frames); n < 2 || frames[n-2].Event != "error" || frames[n-1].Event != "done" {
		t.Fatalf("the reconnected stream read %v, want it to end error, done", types(frames))
	}
	if e := decode(t, frames[len(frames)-2]); e.Kind != string(gen.ErrorKindInterrupted) || e.Seq <= seen {
		t.Errorf("terminal %s at seq %d, want interrupted after seq %d (the last the reader saw)", e.Kind, e.Seq, seen)
	}
}

// TestKeepAlivesThroughAStalledRead: a stream's read of the store stalls (its reply lost, the
// connection silent: a frozen Redis, a black-holed network). The stream's keep-alives go on at
// their interval, not after the Redis client's timeouts and retries (tens of seconds, which an
// audit saw a gateway's idle timeout cut streams on), and the stream then delivers the run.
func TestKeepAlivesThroughAStalledRead(t *testing.T) {
	srv := redistest.Start(t)
	// The stream's replica opens its store from a URL through the proxy; the run is on another
	// replica, straight to Redis.
	prefix := "stalledread:" + rand.Text() + ":"
	st, p := redistest.StoreBehindProxy(t, srv, redisstore.Options{Prefix: prefix})
	const keepAlive = 200 * time.Millisecond
	mid, resume := make(chan string, 1), make(chan struct{})
	runs := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, 0), Runner: phasedRunner(2, 2, mid, resume)})
	h := newHarness(t, server.Options{Store: st, KeepAlive: keepAlive})
	ticket := runs.ask(alice, runs.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	within(t, mid, "the run's first steps")
	type arrival struct {
		f  frame
		at time.Time
	}
	arrivals := make(chan arrival, 256)
	resp := h.stream(t.Context(), alice, ticket, nil)
	go func() {
		defer close(arrivals)
		br := bufio.NewReader(resp.Body)
		for {
			f, err := readFrame(br)
			if err != nil {
				return
			}
			arrivals <- arrival{f, time.Now()}
		}
	}()
	next := func(what string) arrival {
		t.Helper()
		select {
		case a, ok := <-arrivals:
			if !ok {
				t.Fatalf("%s: the stream ended", what)
			}
			return a
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: nothing on the stream within 15s", what)
		}
		return arrival{}
	}
	for a := next("the log so far"); a.f.Event != "step" || a.f.ID < 5; a = next("the log so far") {
	}
	// The stream's replica's next request, its read of the log after the run's next event
	// (the notification comes on its subscription, which sends nothing), loses its reply and
	// stalls.
	p.DropReplies(1, "", faultproxy.Stall)
	close(resume)
	last := time.Now()
	var worst time.Duration
	comments := 0
	for comments < 8 { // about 1.6 s of the stall, in keep-alives
		a := next("keep-alives while the read stalls")
		if a.f.Comment != "" {
			comments++
		}
		worst = max(worst, a.at.Sub(last))
		last = a.at
		if a.f.Event != "" {
			break // the read was answered after all: the stall is over
		}
	}
	if got := p.Stats().RepliesDropped; got != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1: the stall under test did not happen", got)
	}
	// A keep-alive is due every 200ms; one may come half an interval late (the read's bound),
	// and a loaded machine adds some. A stream silent for the client's 3 s read timeout fails.
	if worst > 1500*time.Millisecond {
		t.Errorf("the stream was silent for %v during the stalled read, keep-alive interval %v", worst, keepAlive)
	}
	var frames []frame
	for a := range arrivals {
		if a.f.Event != "" {
			frames = append(frames, a.f)
		}
	}
	if len(frames) == 0 || frames[len(frames)-1].Event != "done" {
		t.Errorf("after the stall the stream read %v, want it to go on to done", types(frames))
	}
}

// TestCreateThroughAStall: a create without an Idempotency-Key against a stalled store answers
// 503 + Retry-After within StoreWait, not after the store client's own read timeouts and
// retries (35 s in an audit, long past a gateway's 5 s), and the ask the store takes once the
// stall ends (the creation was on its way and cannot be taken back) is ended at once, unrun:
// the conversation takes a new ask long before the ticket's lease would have lapsed, and it
// leaves no turn there.
func TestCreateThroughAStall(t *testing.T) {
	srv := redistest.Start(t)
	st, p := redistest.StoreBehindProxy(t, srv, redisstore.Options{Prefix: "late:" + rand.Text() + ":", Lease: time.Minute})
	h := newHarness(t, server.Options{Store: st, StoreWait: 300 * time.Millisecond})
	cid := h.conv(alice)
	// One ask first, so that the connection the creations go through is open: the stalled
	// creation is then held on it, and goes first when the stall ends.
	_ = h.events(alice, h.ask(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q1?"))

	p.Stall()
	start := time.Now()
	r := h.askRaw(alice, cid, "How many sev1 incidents did we have in 2026-Q2?")
	took := time.Since(start)
	p.Pass()
	pr := problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)
	if r.HTTPResponse.Header.Get("Retry-After") == "" || pr.Detail == nil || !strings.Contains(*pr.Detail, "not started") {
		t.Errorf("503 %v, Retry-After %q: want it to say the ask was not started, and when to retry", pr.Detail, r.HTTPResponse.Header.Get("Retry-After"))
	}
	if took >= 3*time.Second { // the client's read timeout: a create that waited for it
		t.Errorf("createAsk against a stalled store answered after %v, want about StoreWait (300ms)", took)
	}

	// The stalled creation reaches Redis once the stall ends. Until its end is written the
	// conversation is busy with it (409, naming it); then it takes the next ask.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second) // the lease is a minute
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var late string
	for {
		ra := h.askRaw(alice, cid, "And in 2026-Q3?")
		if ra.StatusCode() == http.StatusAccepted {
			break
		}
		if ra.StatusCode() != http.StatusConflict || ra.ApplicationproblemJSON409 == nil {
			t.Fatalf("ask after the stall: %d %s", ra.StatusCode(), ra.Body)
		}
		if tk := ra.ApplicationproblemJSON409.Ticket; tk != nil {
			late = *tk
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the conversation still busy with %s after 20 s: the late ask was not ended", late)
		case <-tick.C:
		}
	}
	_, turns, err := st.Conversation(t.Context(), cid)
	if err != nil {
		t.Fatal(err)
	}
	// The late ask, answered 503 "not started", leaves no turn: the next ask is the
	// conversation's first (its own turn, once it has ended), so its model did not see the
	// question twice.
	for _, tn := range turns {
		if tn.Question != "And in 2026-Q3?" {
			t.Fatalf("turns %+v: want none but the next ask's (the late ask leaves none)", turns)
		}
	}
	if late != "" {
		s := h.status(alice, late)
		if s.JSON200 == nil || s.JSON200.State != gen.AskStateError {
			t.Errorf("the late ask %s: %s, want it ended error", late, s.Body)
		}
	}
}

// TestFirstCreateThroughAStall: a replica's first create after its cached store generation
// expired (once a second; here: a replica that has made none yet) asks the store for it, to
// mint the new id. Against a stalled store that lookup, too, is bounded by StoreWait: it was
// made with the request's own context, before the create's bound, so every create of a
// stalled second waited for the store client's read timeouts and retries (10–12 s) first.
func TestFirstCreateThroughAStall(t *testing.T) {
	srv := redistest.Start(t)
	st, p := redistest.StoreBehindProxy(t, srv, redisstore.Options{Prefix: "first:" + rand.Text() + ":", Lease: time.Minute})
	// Another replica on the same store makes the conversation and a first ask (which opens
	// the connections the stalled calls are then held on); the replica under test has made
	// nothing, so it holds no generation.
	other := newHarness(t, server.Options{Store: st})
	cid := other.conv(alice)
	_ = other.events(alice, other.ask(alice, other.conv(alice), "How many sev1 incidents did we have in 2026-Q1?"))
	h := newHarness(t, server.Options{Store: st, StoreWait: 300 * time.Millisecond})

	p.Stall()
	defer p.Pass()
	start := time.Now()
	rc, err := h.cw.CreateConversationWithResponse(t.Context(), nil, gen.CreateConversationRequest{}, bearer(alice))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	_ = problemOf(t, rc.StatusCode(), rc.HTTPResponse.Header.Get("Content-Type"), rc.Body, http.StatusServiceUnavailable)
	if rc.HTTPResponse.Header.Get("Retry-After") == "" || took >= 2*time.Second {
		t.Errorf("createConversation against a stalled store: %d after %v (Retry-After %q), want 503 with Retry-After within about StoreWait (300ms)",
			rc.StatusCode(), took, rc.HTTPResponse.Header.Get("Retry-After"))
	}
	start = time.Now()
	r := h.askRaw(alice, cid, "How many sev1 incidents did we have in 2026-Q2?")
	took = time.Since(start)
	_ = problemOf(t, r.StatusCode(), r.HTTPResponse.Header.Get("Content-Type"), r.Body, http.StatusServiceUnavailable)
	if r.HTTPResponse.Header.Get("Retry-After") == "" || took >= 2*time.Second {
		t.Errorf("createAsk against a stalled store: %d after %v (Retry-After %q), want 503 with Retry-After within about StoreWait (300ms)",
			r.StatusCode(), took, r.HTTPResponse.Header.Get("Retry-After"))
	}
}

// TestCancelOnTheRunnersReplicaWhileRedisRefusesWrites: a cancel that reaches the replica
// running the ask while Redis serves reads but refuses writes (full, at its maxmemory with
// noeviction) answers within StoreWait: 503 + Retry-After, the end it sealed not written yet.
// It waited for the end's write, which the run retries until Redis takes it or the lease
// lapses (a minute here, ten seconds by default): past a gateway's read timeout. The ask ends
// error{cancelled} + done once Redis has room.
func TestCancelOnTheRunnersReplicaWhileRedisRefusesWrites(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "cancel:" + rand.Text() + ":"
	mid, resume := make(chan string, 1), make(chan struct{})
	h := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, time.Minute), StoreWait: 300 * time.Millisecond,
		Runner: phasedRunner(2, 1, mid, resume)})
	ticket := h.ask(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	within(t, mid, "the run's first steps")
	defer close(resume)

	// Full at once and for as long as the test says: maxmemory of one byte, noeviction.
	admin := raw(t, srv)
	for _, kv := range [][2]string{{"maxmemory-policy", "noeviction"}, {"maxmemory", "1"}} {
		if err := admin.ConfigSet(t.Context(), kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	makeRoom := func() {
		if err := admin.ConfigSet(context.Background(), "maxmemory", "0").Err(); err != nil {
			t.Error(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	r, err := h.cw.CancelAskWithResponse(ctx, ticket, bearer(alice))
	took := time.Since(start)
	makeRoom()
	if err != nil {
		t.Fatalf("cancelAsk on the runner's replica while Redis refuses writes: no answer after %v (%v), want one within about StoreWait (300ms)", took, err)
	}
	if took >= 2*time.Second || r.StatusCode() != http.StatusServiceUnavailable || r.HTTPResponse.Header.Get("Retry-After") == "" {
		t.Errorf("cancelAsk on the runner's replica while Redis refuses writes: %d after %v (Retry-After %q), want 503 with Retry-After within about StoreWait (300ms)",
			r.StatusCode(), took, r.HTTPResponse.Header.Get("Retry-After"))
	}
	frames := h.events(alice, ticket)
	if terminal, _ := checkLifecycle(t, frames, gen.EventTypeError); terminal.Kind != string(gen.ErrorKindCancelled) {
		t.Errorf("terminal kind %q, want cancelled", terminal.Kind)
	}
}

// TestReadsThroughAStall: a status, a cancel and a stream's opening against a stalled store
// answer 503 + Retry-After within StoreWait, under a gateway's read timeout, not after the
// store client's own read timeouts and retries (10 s for a status in an audit).
func TestReadsThroughAStall(t *testing.T) {
	srv := redistest.Start(t)
	st, p := redistest.StoreBehindProxy(t, srv, redisstore.Options{Prefix: "stall:" + rand.Text() + ":"})
	h := newHarness(t, server.Options{Store: st, StoreWait: 300 * time.Millisecond})
	ticket := h.ask(alice, h.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
	_ = h.events(alice, ticket)

	p.Stall()
	defer p.Pass()
	within := func(what string, took time.Duration, status int, hdr http.Header) {
		t.Helper()
		if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
			t.Errorf("%s against a stalled store: %d (Retry-After %q), want 503 with Retry-After", what, status, hdr.Get("Retry-After"))
		}
		if took >= 3*time.Second { // the client's read timeout: a call that waited for it
			t.Errorf("%s against a stalled store answered after %v, want about StoreWait (300ms)", what, took)
		}
	}
	start := time.Now()
	r := h.status(alice, ticket)
	within("getAsk", time.Since(start), r.StatusCode(), r.HTTPResponse.Header)
	start = time.Now()
	c := h.cancel(alice, ticket)
	within("cancelAsk", time.Since(start), c.StatusCode(), c.HTTPResponse.Header)
	start = time.Now()
	resp := h.stream(t.Context(), alice, ticket, nil)
	_ = readBody(t, resp)
	within("streamEvents", time.Since(start), resp.StatusCode, resp.Header)
}
