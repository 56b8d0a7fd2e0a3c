package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// noticeHandler says the client's notices (a retried request, a reconnected stream) to a person
// on stderr as sentences: they came as log lines ("msg=\"event stream reconnecting\" ticket=…
// attempt=1 delay=1.73s cause=…"), the only place the CLI spoke in key=value. A notice it does
// not know is said as its message and its attributes, still one line.
type noticeHandler struct {
	mu    *sync.Mutex
	w     io.Writer
	attrs []slog.Attr
}

func newNoticeHandler(w io.Writer) *noticeHandler { return &noticeHandler{mu: new(sync.Mutex), w: w} }

func (h *noticeHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *noticeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &noticeHandler{mu: h.mu, w: h.w, attrs: append(h.attrs[:len(h.attrs):len(h.attrs)], as...)}
}

// WithGroup keeps the attributes flat: a notice names few, and none twice.
func (h *noticeHandler) WithGroup(string) slog.Handler { return h }

func (h *noticeHandler) Handle(_ context.Context, r slog.Record) error {
	a := make(map[string]slog.Value, len(h.attrs)+r.NumAttrs())
	var keys []string
	add := func(at slog.Attr) bool {
		if _, seen := a[at.Key]; !seen {
			keys = append(keys, at.Key)
		}
		a[at.Key] = at.Value.Resolve()
		return true
	}
	for _, at := range h.attrs {
		add(at)
	}
	r.Attrs(add)
	line := noticeSentence(r.Message, a)
	if line == "" {
		var b strings.Builder
		b.WriteString(r.Message)
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%q", k, a[k].String())
		}
		line = b.String()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, line+"\n")
	return err
}

// noticeSentence is the sentence for one of the client's notices, "" for one it does not know.
func noticeSentence(msg string, a map[string]slog.Value) string {
	str := func(k string) string {
		if v, ok := a[k]; ok {
			return v.String()
		}
		return ""
	}
	delay := func() string {
		v, ok := a["delay"]
		if !ok || v.Kind() != slog.KindDuration {
			return str("delay")
		}
		if d := v.Duration(); d >= time.Second {
			return d.Round(100 * time.Millisecond).String()
		} else {
			return d.Round(time.Millisecond).String()
		}
	}
	switch msg {
	case "event stream reconnecting":
		from := "from the start"
		if after := str("after"); after != "" && after != "0" {
			from = "after event " + after
		}
		return fmt.Sprintf("The event stream broke (%s); picking it up %s in %s (attempt %s)…", str("cause"), from, delay(), str("attempt"))
	case "request retrying":
		return fmt.Sprintf("%s did not go through (%s); trying again in %s (attempt %s)…", opWords(str("op")), str("cause"), delay(), str("attempt"))
	case "request retried by the transport":
		return fmt.Sprintf("%s was sent again: its connection failed after it was sent (attempt %s).", opWords(str("op")), str("attempt"))
	case "cancel after the caller left failed":
		return fmt.Sprintf("Cancelling %s failed (%s): the run may go on; ask --cancel %s tries again.", str("ticket"), str("err"), str("ticket"))
	}
	return ""
}

// opWords names a request of the contract (its operationId) for a person.
func opWords(op string) string {
	switch op {
	case "createAsk":
		return "The ask"
	case "cancelAsk":
		return "The cancel"
	case "createConversation":
		return "Starting a conversation"
	case "getAsk":
		return "Reading the ask's status"
	}
	return "The request (" + op + ")"
}
