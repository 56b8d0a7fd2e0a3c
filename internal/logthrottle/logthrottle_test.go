package logthrottle_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask/internal/logthrottle"
)

// TestGateBoundsARecurringFailure: a failure at every 2.5 s tick for 3 minutes is 3 warn
// lines, not 72, then one line at its end; a new failure is logged at once.
func TestGateBoundsARecurringFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		var g logthrottle.Gate
		for range 72 {
			g.Fail(t.Context(), log, "sweep failed", "err", "unavailable")
			time.Sleep(2500 * time.Millisecond)
		}
		g.OK(t.Context(), log, "sweep works again")
		g.OK(t.Context(), log, "sweep works again") // nothing failing: no line
		g.Fail(t.Context(), log, "sweep failed", "err", "unavailable")

		var got []string
		for line := range strings.Lines(buf.String()) {
			var l struct {
				Level, Msg           string
				Suppressed, Failures *int
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatal(err)
			}
			switch {
			case l.Suppressed != nil:
				got = append(got, fmt.Sprintf("%s %s suppressed=%d", l.Level, l.Msg, *l.Suppressed))
			case l.Failures != nil:
				got = append(got, fmt.Sprintf("%s %s failures=%d", l.Level, l.Msg, *l.Failures))
			}
		}
		want := []string{
			"WARN sweep failed suppressed=0",
			"WARN sweep failed suppressed=23",
			"WARN sweep failed suppressed=23",
			"INFO sweep works again failures=72",
			"WARN sweep failed suppressed=0",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// TestGateNamesItsEnd: a gate with its own interval and attribute names (the store outage's:
// a line per 10 s, answered_503, unavailable_ms) logs a 30 s failure at 10 requests a second as
// 3 warn lines, then its end with the count under CountKey and the failure's duration, from its
// first occurrence, under DurationKey.
func TestGateNamesItsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		g := logthrottle.Gate{Every: 10 * time.Second, CountKey: "answered_503", DurationKey: "unavailable_ms"}
		for range 300 {
			g.Fail(t.Context(), log, "store unavailable", "route", "/v1/conversations")
			time.Sleep(100 * time.Millisecond)
		}
		g.OK(t.Context(), log, "store available again")

		var got []string
		for line := range strings.Lines(buf.String()) {
			var l map[string]any
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatal(err)
			}
			delete(l, "time")
			got = append(got, fmt.Sprint(l))
		}
		want := []string{
			"map[level:WARN msg:store unavailable route:/v1/conversations suppressed:0]",
			"map[level:WARN msg:store unavailable route:/v1/conversations suppressed:99]",
			"map[level:WARN msg:store unavailable route:/v1/conversations suppressed:99]",
			"map[answered_503:300 level:INFO msg:store available again unavailable_ms:30000]",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// TestGateConcurrentFailAndOK: failures and successes from many goroutines at once (requests
// served and refused while the store falters) end each failure exactly once, so the end lines
// count every occurrence once, and each failure has exactly one warn line within its interval.
// Under -race it also checks that OK's lock-free path reads nothing it must not.
func TestGateConcurrentFailAndOK(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer // slog's handler writes each line whole, under its own lock
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		var g logthrottle.Gate
		const goroutines, rounds = 8, 200
		var wg sync.WaitGroup
		for i := range goroutines {
			wg.Go(func() {
				for r := range rounds {
					g.Fail(t.Context(), log, "failed")
					if (i+r)%3 == 0 {
						g.OK(t.Context(), log, "works again")
					}
					g.OK(t.Context(), log, "works again")
				}
			})
		}
		wg.Wait()
		g.OK(t.Context(), log, "works again") // ends a failure still under way, if any

		var warns, ends, failures, suppressed int
		for line := range strings.Lines(buf.String()) {
			var l struct {
				Msg                  string
				Suppressed, Failures int
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatal(err)
			}
			switch l.Msg {
			case "failed":
				warns++
				suppressed += l.Suppressed
			case "works again":
				ends++
				failures += l.Failures
			}
		}
		if failures != goroutines*rounds {
			t.Errorf("the end lines count %d failures, want %d", failures, goroutines*rounds)
		}
		// The clock does not move: each failure is one warn line, its first, and one end.
		if warns != ends || suppressed != 0 || ends == 0 {
			t.Errorf("%d warn lines (suppressed %d in all) for %d ends, want one each and no suppressed", warns, suppressed, ends)
		}
	})
}
