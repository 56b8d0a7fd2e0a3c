package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestStoreOutageLogsOncePerInterval: a long outage logs one warn line per
// storeOutageLogEvery whatever the request rate, each counting the 503s it did not log, its
// end says how many and for how long, and a new outage after a served request starts with a
// line of its own.
func TestStoreOutageLogsOncePerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		o := newStoreOutage()
		errDown := errors.New("redis store: store: unavailable")
		refused := func() {
			o.Fail(t.Context(), log, "store unavailable: request answered 503",
				"method", "POST", "route", "/v1/conversations", "err", errDown)
		}
		served := func() { o.OK(t.Context(), log, "store available again: requests served") }
		// 30 s of an outage, 10 requests a second.
		for range 300 {
			refused()
			time.Sleep(100 * time.Millisecond)
		}
		served()
		served() // no outage: nothing
		refused()

		var got []string
		for line := range strings.Lines(buf.String()) {
			var l struct {
				Msg        string
				Suppressed *int
				Answered   *int `json:"answered_503"`
				Took       int  `json:"unavailable_ms"`
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatal(err)
			}
			switch {
			case l.Suppressed != nil:
				got = append(got, l.Msg+" suppressed="+strconv.Itoa(*l.Suppressed))
			case l.Answered != nil:
				got = append(got, l.Msg+" answered_503="+strconv.Itoa(*l.Answered)+" unavailable_ms="+strconv.Itoa(l.Took))
			default:
				got = append(got, l.Msg)
			}
		}
		want := []string{
			"store unavailable: request answered 503 suppressed=0",
			"store unavailable: request answered 503 suppressed=99",
			"store unavailable: request answered 503 suppressed=99",
			"store available again: requests served answered_503=300 unavailable_ms=30000",
			"store unavailable: request answered 503 suppressed=0",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}
