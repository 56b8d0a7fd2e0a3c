package server_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestSentinelFailoverMidRun: replicas whose store is a redis+sentinel:// URL (a real Sentinel,
// a primary and its replica) meet the primary's role moving to the replica in the middle of a
// run, the run's next writes going the moment the replica answers as primary. A reader on
// another replica must read a whole log: gap-free, exactly one terminal, exactly one done;
// and the conversation must take the next ask.
//
//   - primary-killed: the primary is SIGKILLed once its replica had everything, and the
//     Sentinel promotes the replica after its down-after time (1 s, within the 5 s lease). The
//     dead primary takes no write, so the run's writes reach the new one: the answer, every step.
//   - failover: a planned SENTINEL FAILOVER. The old primary goes on taking writes until the
//     Sentinel turns it into a replica (10–15 s later here), and a client learns of the switch
//     only from the Sentinel's +switch-master: writes made in between land on the old primary
//     and are lost, as in any Sentinel failover. The run's writes, made at once, may fall there:
//     then the run ends error{interrupted}, the documented outcome (docs/scale-out.md, "On
//     Sentinel"): after the lapse of its lease on the new primary, gap-free, when all of them
//     fell there; restored by its runner after every seq it assigned, the lost ones a gap, when
//     a later write reached the new primary (answered after the gap when that write was the
//     run's end, which the runner restores as it sealed it). Else it is answered with every
//     step. A reader that read the old primary inside the window may have been sent events the
//     new primary never got; when the lapsed lease's end there takes their seqs, its stream
//     ends with a warning and no done, and the log read again is whole.
func TestSentinelFailoverMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary, a replica and a Sentinel")
	}
	for _, fault := range []string{"failover", "primary-killed"} {
		t.Run(fault, func(t *testing.T) {
			sen := redistest.StartSentinel(t)
			prefix := "sentinel:" + rand.Text() + ":"
			open := func() *redisstore.Store {
				s, err := redisstore.New(t.Context(), redisstore.Options{URL: sen.URL(), Prefix: prefix, Lease: 5 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
			mid, resume := make(chan string, 1), make(chan struct{})
			a := newHarness(t, server.Options{Store: open(), Runner: phasedRunner(3, 4, mid, resume)})
			b := newHarness(t, server.Options{Store: open()}) // a reader on another replica

			conv := a.conv(alice)
			ticket := a.ask(alice, conv, "How many sev1 incidents did we have in 2026-Q2?")
			within(t, mid, "the run's first steps")
			assigned := a.status(alice, ticket).JSON200.LastSeq // accepted, open, milestone, 3 steps
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			old, err := sen.Primary(ctx)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			switch fault {
			case "failover":
				_, err = sen.Failover(ctx)
			case "primary-killed":
				if err = sen.Synced(ctx); err == nil {
					_, err = sen.KillPrimary(ctx)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			now, err := sen.Primary(ctx)
			if err != nil || now == old {
				t.Fatalf("the Sentinel names %v after the %s (%v), want the replica", now, fault, err)
			}
			t.Logf("%s: the replica answers as primary %v after the fault began", fault, time.Since(start).Round(time.Millisecond))
			close(resume)

			frames := b.events(alice, ticket)
			if fault == "failover" && (len(frames) == 0 || frames[len(frames)-1].Event != "done") {
				// The stream read the old primary inside the switch's window, and every
				// write of the run's fell there: the run's lease lapsed on the new primary,
				// and another replica ended the log there after what it held, at seqs the
				// stream had been sent for other events (docs/scale-out.md, "On Sentinel").
				// The stream ends, with a warning; the log as the store keeps it is whole.
				if !strings.Contains(b.logs.String(), "the ticket's log ended below events this stream had sent") {
					t.Errorf("the stream ended after %v, with no done and no warning", types(frames))
				}
				redistest.Poll(t, "the lost run's end on the new primary", func() bool {
					s := b.status(alice, ticket)
					return s.JSON200 != nil && s.JSON200.State != gen.AskStateRunning
				})
				whole := b.events(alice, ticket)
				if len(frames) > 0 && len(whole) > 0 && whole[len(whole)-1].ID > frames[len(frames)-1].ID {
					t.Errorf("the stream ended at seq %d, below the log's end at %d", frames[len(frames)-1].ID, whole[len(whole)-1].ID)
				}
				t.Logf("%s: the stream read %v, the log ended below it: %v", fault, types(frames), types(whole))
				frames = whole
			}
			want := gen.EventTypeAnswer
			if fault == "failover" && len(frames) > 2 && frames[len(frames)-2].Event == string(gen.EventTypeError) {
				want = gen.EventTypeError
			}
			t.Logf("%s: %v", fault, types(frames))
			switch {
			case fault == "failover" && want == gen.EventTypeAnswer && gapped(frames):
				// The run's steps after the switch fell on the old primary, and its end was
				// the first write to reach the new one, whose log does not continue the
				// run's: the runner restored the end it was writing (its answer), after every
				// seq it assigned, the lost steps a gap.
				checkRestoredEnd(t, frames, assigned, gen.EventTypeAnswer)
			case want == gen.EventTypeError && gapped(frames):
				// The run's writes after the switch fell on the old primary, and a later one
				// reached the new primary, whose log does not continue the run's: the runner
				// restored it, ended after every seq it assigned, the lost ones a gap.
				checkRestored(t, frames, assigned)
			case want == gen.EventTypeError:
				// Every write after the switch fell on the old primary: the lease lapsed on
				// the new one and another replica ended the run there.
				if terminal, _ := checkLifecycle(t, frames, want); terminal.Kind != string(gen.ErrorKindInterrupted) {
					t.Errorf("the run ended error{%s}, want interrupted or answered", terminal.Kind)
				}
			default:
				_, done := checkLifecycle(t, frames, want)
				checkPhasedRun(t, frames, done, a)
			}
			// The conversation is free again, on the new primary: the next ask runs. After a
			// planned failover the reader may have read the old primary inside the switch's
			// window too, and seen the run answered there while the new primary still runs it
			// (those writes are the ones lost): then the conversation is freed when the run's
			// lease lapses on the new primary, and until then the ask is a 409.
			next := ""
			deadline := time.Now().Add(20 * time.Second)
			for next == "" {
				r := b.askRaw(alice, conv, "And in 2026-Q3?")
				switch {
				case r.StatusCode() == http.StatusAccepted && r.JSON202 != nil:
					next = r.JSON202.Ticket
				case fault == "failover" && r.StatusCode() == http.StatusConflict && time.Now().Before(deadline):
					redistest.Poll(t, "the lost run's end on the new primary", func() bool {
						s := b.status(alice, ticket)
						return s.JSON200 != nil && s.JSON200.State != gen.AskStateRunning
					})
				default:
					t.Fatalf("the next ask: %d %s", r.StatusCode(), r.Body)
				}
			}
			checkLifecycle(t, b.events(alice, next), gen.EventTypeAnswer)
		})
	}
}

// gapped reports whether the frames' seqs skip a number (a log the store lost part of).
func gapped(frames []frame) bool {
	for i, f := range frames {
		if f.ID != int64(i+1) {
			return true
		}
	}
	return false
}
