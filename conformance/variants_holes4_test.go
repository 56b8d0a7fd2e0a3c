package conformance_test

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// holes4Variants are the defects the fourth hole audit found the suite passed: a resumed
// stream framed unlike one read from the start, and a replay whose events are made again
// rather than read from the log; and the headers every answer carries left off where a
// handler answers outside the service's common path.
func holes4Variants() []variant {
	return []variant{
		// A resume whose frames' ids are not their seqs: the browser's next reconnect resumes
		// after the id, losing or repeating events.
		{name: "id-not-seq-on-resume", fails: []string{"events.sse-framing"},
			frame: onResume(func(_ *streamState, f sseFrame, m map[string]any) []sseFrame {
				g := eventFrame(m)
				g.lines[0] = "id: " + strconv.FormatInt(int64(m["seq"].(float64))+1, 10)
				return []sseFrame{g}
			})},
		// A resume that does not send the reconnect delay.
		{name: "no-retry-on-resume", fails: []string{"events.sse-framing"},
			frame: func(_ *proxy, st *streamState, f sseFrame) []sseFrame {
				if st.cursor == "" || st.cursor == "0" {
					return []sseFrame{f}
				}
				var g sseFrame
				for _, l := range f.lines {
					if !strings.HasPrefix(l, "retry:") {
						g.lines = append(g.lines, l)
					}
				}
				if len(g.lines) == 0 {
					return nil
				}
				return []sseFrame{g}
			}},
		// A replay that stamps each event's ts as it sends it, not when its seq was assigned.
		{name: "replay-restamps-ts", fails: []string{"replay.header-after-done", "replay.query-after-done", "replay.during-run"},
			frame: onResume(func(_ *streamState, _ sseFrame, m map[string]any) []sseFrame {
				m["ts"] = time.Now().UTC().Format(time.RFC3339Nano)
				return []sseFrame{eventFrame(m)}
			})},
		// Streams answered without nosniff: every other response carries it.
		{name: "no-nosniff-on-streams", fails: []string{"headers.every-response"},
			header: func(h http.Header) { h.Del("X-Content-Type-Options") }},
		// Problems answered without X-Request-Id, the id to quote when reporting one.
		{name: "no-request-id-on-problems", fails: []string{"headers.every-response"},
			body: func(_ *proxy, _ *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				if mt, _, _ := mime.ParseMediaType(h.Get("Content-Type")); mt == "application/problem+json" {
					h.Del("X-Request-Id")
				}
				return status, b
			}},
	}
}
