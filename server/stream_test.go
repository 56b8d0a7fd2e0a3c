package server_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

// gatedRunner emits first events, waits for gate, emits second more, and answers.
func gatedRunner(first, second int, gate <-chan struct{}) ask.Runner {
	return ask.RunnerFunc(func(ctx context.Context, _ ask.Request, emit ask.Emitter) ask.Outcome {
		for i := range first {
			if i%3 == 0 {
				emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseQuerying, Subject: "incidents", Source: "demo"})
			} else {
				emit.Step(step(i))
			}
		}
		select {
		case <-gate:
		case <-ctx.Done():
		}
		for i := range second {
			emit.Step(step(first + i))
		}
		return ask.Outcome{Answer: answer("ok")}
	})
}

// TestReplayFromEveryCursor opens a stream at every cursor while the run is still emitting,
// lets the run finish, and checks that each stream delivers exactly the events after its cursor:
// replay then live, no gap, no duplicate.
func TestReplayFromEveryCursor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		h := newHarness(t, server.Options{Runner: gatedRunner(6, 5, gate)})
		ticket := h.ask(alice, h.conv(alice), "replay me")
		synctest.Wait() // the runner waits at the gate
		st := h.status(alice, ticket).JSON200
		last := st.LastSeq
		if st.State != gen.AskStateRunning || last != 8 { // accepted, open, 6 events
			t.Fatalf("before the gate: state %s, last_seq %d", st.State, last)
		}
		type open struct {
			cursor int64
			fr     *frameReader
		}
		var streams []open
		for c := int64(0); c <= last; c++ {
			var params gen.StreamEventsParams
			switch c % 3 {
			case 0:
				id := strconv.FormatInt(c, 10)
				params.LastEventID = &id
			case 1:
				params.After = &c
			case 2: // both: the header wins over the query
				id := strconv.FormatInt(c, 10)
				wrong := int64(0)
				params.LastEventID, params.After = &id, &wrong
			}
			resp := h.stream(context.Background(), alice, ticket, &params)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("cursor %d: status %d", c, resp.StatusCode)
			}
			for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"} {
				if got := resp.Header.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			fr := newFrames(resp)
			if f := fr.nextAny(t); f.Comment == "" || f.Retry == "" {
				t.Fatalf("stream does not open with a comment and retry: %+v", f)
			}
			streams = append(streams, open{c, fr})
		}
		// Half the streams read their replay before the run resumes, half after.
		for _, s := range streams[:len(streams)/2] {
			for want := s.cursor + 1; want <= last; want++ {
				if f := s.fr.next(t); f.ID != want {
					t.Fatalf("cursor %d: replay got seq %d, want %d", s.cursor, f.ID, want)
				}
			}
		}
		close(gate)
		var final int64
		for i, s := range streams {
			from := s.cursor + 1
			if i < len(streams)/2 {
				from = last + 1
			}
			frames := readAll(t, s.fr.br)
			for j, f := range frames {
				if want := from + int64(j); f.ID != want {
					t.Fatalf("cursor %d: got seq %d at %d, want %d", s.cursor, f.ID, j, want)
				}
			}
			if len(frames) == 0 || frames[len(frames)-1].Event != "done" {
				t.Fatalf("cursor %d: stream did not end with done: %v", s.cursor, types(frames))
			}
			end := frames[len(frames)-1].ID
			if final != 0 && end != final {
				t.Fatalf("streams disagree on the last seq: %d vs %d", end, final)
			}
			final = end
		}
		all := h.events(alice, ticket)
		_, done := checkLifecycle(t, all, gen.EventTypeAnswer)
		if done.Steps != 4+5 {
			t.Errorf("done.steps = %d, want 9", done.Steps)
		}

		// After the end, a reconnect replays what is retained after its cursor and closes;
		// a reconnect at the last seq gets nothing and closes.
		for _, c := range []int64{final - 2, final} {
			id := strconv.FormatInt(c, 10)
			frames := readAll(t, h.stream(context.Background(), alice, ticket, &gen.StreamEventsParams{LastEventID: &id}).Body)
			if int64(len(frames)) != final-c {
				t.Errorf("reconnect at %d after the end: %v", c, types(frames))
			}
		}
	})
}

func TestCursorErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{})
		ticket := h.ask(alice, h.conv(alice), "cursor")
		synctest.Wait()
		last := h.status(alice, ticket).JSON200.LastSeq
		for _, id := range []string{"abc", "-1", "1.5", "+3", " 2", strconv.FormatInt(last+1, 10), "99999999999999999999"} {
			resp := h.stream(context.Background(), alice, ticket, &gen.StreamEventsParams{LastEventID: &id})
			body := readBody(t, resp)
			problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), body, http.StatusBadRequest)
		}
		beyond := last + 1
		resp := h.stream(context.Background(), alice, ticket, &gen.StreamEventsParams{After: &beyond})
		problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), readBody(t, resp), http.StatusBadRequest)
	})
}

// TestAfterIsWrittenAsLastEventID: the `after` query parameter is the same cursor as
// Last-Event-ID, written the same way (1 to 18 ASCII digits). A sign, or more digits than the
// header allows, is a 400 as it is in the header; kin-openapi alone read `after=%2B3` as 3 and
// `after=-0` as 0, so one cursor had two syntaxes.
func TestAfterIsWrittenAsLastEventID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{})
		ticket := h.ask(alice, h.conv(alice), "after")
		synctest.Wait()
		get := func(after string) *http.Response {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://ask.test/ask/v1/asks/"+ticket+"/events?after="+after, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+alice)
			req.Header.Set("Last-Event-ID", "1") // the header wins, but a malformed after is still refused
			return h.do(req)
		}
		for _, after := range []string{"%2B3", "%2B0", "-0", "%2D0", "0000000000000000003", "%203"} {
			resp := get(after)
			problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), readBody(t, resp), http.StatusBadRequest)
		}
		for _, after := range []string{"3", "03", "000000000000000003"} {
			if resp := get(after); resp.StatusCode != http.StatusOK {
				t.Errorf("after=%s: %d, want 200", after, resp.StatusCode)
			}
		}
	})
}

// TestOverflowDropsOnlySteps fills a small log with steps among milestones.
func TestOverflowDropsOnlySteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max = 12
		h := newHarness(t, server.Options{MaxEvents: max, Runner: ask.RunnerFunc(func(_ context.Context, _ ask.Request, emit ask.Emitter) ask.Outcome {
			for i := range 40 {
				if i%10 == 0 {
					emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseQuerying, Subject: "s" + strconv.Itoa(i), Source: "demo"})
				}
				emit.Step(step(i))
			}
			return ask.Outcome{Answer: answer("ok")}
		})})
		ticket := h.ask(alice, h.conv(alice), "overflow")
		synctest.Wait() // the run has ended: read what is retained, not what a live reader saw
		frames := h.events(alice, ticket)
		if len(frames) != max {
			t.Fatalf("retained %d events, want %d: %v", len(frames), max, types(frames))
		}
		counts := map[string]int{}
		var prev int64
		var lastStepCall string
		for _, f := range frames {
			e := decode(t, f)
			if e.Seq <= prev {
				t.Fatalf("seq not increasing: %d after %d", e.Seq, prev)
			}
			prev = e.Seq
			counts[e.Type]++
			if e.Type == "step" {
				var s gen.StepEvent
				if err := jsonUnmarshal(f.Data, &s); err != nil {
					t.Fatal(err)
				}
				lastStepCall = s.CallId
			}
		}
		// Every non-step event survived: accepted, open, 4 milestones, close, answer, done.
		want := map[string]int{"accepted": 1, "branch": 2, "milestone": 4, "answer": 1, "done": 1, "step": max - 9}
		for k, v := range want {
			if counts[k] != v {
				t.Errorf("%s: %d retained, want %d (%v)", k, counts[k], v, counts)
			}
		}
		if lastStepCall != "call-39" {
			t.Errorf("newest retained step is %s, want call-39 (oldest are evicted first)", lastStepCall)
		}
		done := decode(t, frames[len(frames)-1])
		if done.Steps != 40 {
			t.Errorf("done.steps = %d, want 40", done.Steps)
		}
		if done.Seq != 1+1+4+40+1+1+1 {
			t.Errorf("done.seq = %d: seqs were spent on something else", done.Seq)
		}
	})
}

// TestNonStepFlood: a log whose non-step events alone pass the bound keeps every one of them
// (milestones and branches are never dropped, at emission or later) and has evicted every step,
// oldest first, as the bound requires: the seqs it skips are the steps' and no others, and
// every step a reader saw live came after its milestone.
func TestNonStepFlood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max, rounds = 8, 6
		h := newHarness(t, server.Options{MaxEvents: max, Runner: ask.RunnerFunc(func(_ context.Context, _ ask.Request, emit ask.Emitter) ask.Outcome {
			emit.Branch(gen.BranchBody{BranchId: "b2", Role: "source", State: gen.BranchBodyStateOpen})
			for i := range rounds {
				emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseQuerying, Subject: "s" + strconv.Itoa(i), Source: "demo"})
				emit.Step(step(i))
			}
			emit.Branch(gen.BranchBody{BranchId: "b2", Role: "source", State: gen.BranchBodyStateClose})
			return ask.Outcome{Answer: answer("ok")}
		})})
		ticket := h.ask(alice, h.conv(alice), "flood")
		synctest.Wait()
		frames := h.events(alice, ticket)
		// accepted, the supervisor's open, b2's open, a milestone a round, b2's close, the
		// supervisor's close, answer, done; each round's step evicted.
		nonStep := 1 + 2 + rounds + 2 + 1 + 1
		if len(frames) != nonStep {
			t.Fatalf("retained %d events, want the %d non-step ones: %v", len(frames), nonStep, types(frames))
		}
		if got := types(frames); got[0] != "accepted" || got[len(got)-2] != "answer" || got[len(got)-1] != "done" {
			t.Errorf("events %v: want accepted first, then answer and done last", got)
		}
		var skipped []int64
		prev := int64(0)
		milestones := 0
		for _, f := range frames {
			e := decode(t, f)
			if e.Type == "step" {
				t.Errorf("step at seq %d retained in a log past its bound of non-step events", e.Seq)
			}
			if e.Type == "milestone" {
				milestones++
			}
			for s := prev + 1; s < e.Seq; s++ {
				skipped = append(skipped, s)
			}
			prev = e.Seq
		}
		if milestones != rounds {
			t.Errorf("%d milestones retained, want all %d", milestones, rounds)
		}
		// Seqs 1–3 are accepted and the two opens; round i is milestone 4+2i, step 5+2i.
		var want []int64
		for i := range rounds {
			want = append(want, int64(5+2*i))
		}
		if !slices.Equal(skipped, want) {
			t.Errorf("skipped seqs %v, want the steps' %v", skipped, want)
		}
		done := decode(t, frames[len(frames)-1])
		if done.Steps != rounds {
			t.Errorf("done.steps = %d, want %d", done.Steps, rounds)
		}
	})
}

// TestKeepAlive: a silent run's stream carries `: keepalive` every KeepAlive seconds of
// silence, and events reset the interval.
func TestKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, server.Options{KeepAlive: 10 * time.Second, Runner: ask.RunnerFunc(func(ctx context.Context, _ ask.Request, emit ask.Emitter) ask.Outcome {
			time.Sleep(25 * time.Second) // a silent model turn
			emit.Milestone(gen.MilestoneBody{Phase: gen.MilestonePhaseGrounding, Subject: "x", Source: "demo"})
			time.Sleep(5 * time.Second)
			return ask.Outcome{Answer: answer("ok")}
		})})
		ticket := h.ask(alice, h.conv(alice), "slow one")
		start := time.Now()
		fr := newFrames(h.stream(context.Background(), alice, ticket, nil))
		type seen struct {
			at   time.Duration
			what string
		}
		var got []seen
		for {
			f, err := readFrame(fr.br)
			if err != nil {
				break
			}
			what := f.Event
			if what == "" {
				what = ":" + f.Comment
			}
			got = append(got, seen{time.Since(start), what})
		}
		want := []seen{
			{0, ":ask events"}, {0, "accepted"}, {0, "branch"},
			{10 * time.Second, ":keepalive"}, {20 * time.Second, ":keepalive"},
			{25 * time.Second, "milestone"},
			{30 * time.Second, "branch"}, {30 * time.Second, "answer"}, {30 * time.Second, "done"},
		}
		if len(got) != len(want) {
			t.Fatalf("got %v, want %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("frame %d: got %v, want %v", i, got[i], want[i])
			}
		}
	})
}

// TestDisconnectDoesNotCancel: a client that goes away leaves the run running.
func TestDisconnectDoesNotCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		h := newHarness(t, server.Options{Runner: gatedRunner(2, 2, gate)})
		ticket := h.ask(alice, h.conv(alice), "disconnect")
		ctx, cancel := context.WithCancel(context.Background())
		resp := h.stream(ctx, alice, ticket, nil)
		newFrames(resp).next(t)
		cancel()
		_ = resp.Body.Close()
		synctest.Wait()
		close(gate)
		checkLifecycle(t, h.events(alice, ticket), gen.EventTypeAnswer)
	})
}

// TestStalledReader: a reader that stops reading costs the run nothing, and when it resumes it
// gets every non-step event and the newest steps, in order.
func TestStalledReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const max = 10
		gate := make(chan struct{})
		h := newHarness(t, server.Options{MaxEvents: max, Runner: gatedRunner(0, 30, gate)})
		ticket := h.ask(alice, h.conv(alice), "stall")
		fr := newFrames(h.stream(context.Background(), alice, ticket, nil))
		if f := fr.next(t); f.Event != "accepted" {
			t.Fatalf("first event %s", f.Event)
		}
		close(gate) // the reader reads nothing while the run emits 30 steps and ends
		synctest.Wait()
		if st := h.status(alice, ticket).JSON200; st.State != gen.AskStateAnswer {
			t.Fatalf("the run did not finish while the reader stalled: %s", st.State)
		}
		frames := readAll(t, fr.br)
		var prev int64 = 1
		counts := map[string]int{}
		for _, f := range frames {
			if f.ID <= prev {
				t.Fatalf("seq %d after %d", f.ID, prev)
			}
			prev = f.ID
			counts[f.Event]++
		}
		if counts["branch"] != 2 || counts["answer"] != 1 || counts["done"] != 1 {
			t.Errorf("non-step events missing after a stall: %v", types(frames))
		}
		if d := decode(t, frames[len(frames)-1]); d.Steps != 30 {
			t.Errorf("done.steps = %d, want 30", d.Steps)
		}
	})
}
