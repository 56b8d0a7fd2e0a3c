package logthrottle_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
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
