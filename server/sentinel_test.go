package server_test

import (
	"context"
	"crypto/rand"
	"net/http"
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
//     then its lease lapses on the new primary and the run ends error{interrupted}, the
//     documented outcome (docs/scale-out.md, "On Sentinel"); else it is answered with every step.
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
			want := gen.EventTypeAnswer
			if fault == "failover" && len(frames) > 2 && frames[len(frames)-2].Event == string(gen.EventTypeError) {
				want = gen.EventTypeError
			}
			terminal, done := checkLifecycle(t, frames, want)
			t.Logf("%s: %v", fault, types(frames))
			if want == gen.EventTypeError {
				if terminal.Kind != string(gen.ErrorKindInterrupted) {
					t.Errorf("the run ended error{%s}, want interrupted or answered", terminal.Kind)
				}
			} else {
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
