package main

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestNoticesAreSentences: the client's notices reach a person as sentences, not as key=value
// log lines, and one the CLI does not know still as one line with what it carries.
func TestNoticesAreSentences(t *testing.T) {
	var b bytes.Buffer
	log := slog.New(newNoticeHandler(&b))
	log.Info("event stream reconnecting", "ticket", "t_1", "after", int64(7), "attempt", 2, "delay", 1734*time.Millisecond, "cause", "unexpected EOF")
	log.Info("event stream reconnecting", "ticket", "t_1", "after", int64(0), "attempt", 1, "delay", 250*time.Millisecond, "cause", "unexpected EOF")
	log.Info("request retrying", "op", "createAsk", "attempt", 2, "delay", 2*time.Second, "cause", "ask createAsk: 503 Service Unavailable")
	log.Info("request retried by the transport", "op", "cancelAsk", "attempt", 1, "cause", "the connection failed after the request was sent")
	log.Warn("cancel after the caller left failed", "ticket", "t_2", "err", errors.New("connection refused").Error())
	log.With("component", "x").Info("something new", "n", 3)
	log.Debug("not said")
	want := []string{
		"The event stream broke (unexpected EOF); picking it up after event 7 in 1.7s (attempt 2)…",
		"The event stream broke (unexpected EOF); picking it up from the start in 250ms (attempt 1)…",
		"The ask did not go through (ask createAsk: 503 Service Unavailable); trying again in 2s (attempt 2)…",
		"The cancel was sent again: its connection failed after it was sent (attempt 1).",
		"Cancelling t_2 failed (connection refused): the run may go on; ask --cancel t_2 tries again.",
		`something new component="x" n="3"`,
	}
	if got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("said:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
