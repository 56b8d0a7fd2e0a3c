package conformance_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// stashQuestion copies an ask's question into a request header the body functions read (the
// proxy forwards it too; the service ignores it).
func stashQuestion(_ *proxy, r *http.Request) {
	if !isOp(r, http.MethodPost, "v1/conversations/*/asks") {
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m struct {
		Question string `json:"question"`
	}
	_ = json.Unmarshal(body, &m)
	r.Header.Set("X-Conformance-Question", m.Question)
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
}

// awaitRunEnd returns once the run of ticket has ended (or in 10 s): a GET of its status with
// Prefer: wait, as the request's caller.
func (p *proxy) awaitRunEnd(r *http.Request, ticket string) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, p.upstream.String()+"/v1/asks/"+ticket, nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", r.Header.Get("Authorization"))
	req.Header.Set("Prefer", "wait=10")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

// mutationVariants are the defects a mutation audit of the server found the suite passing:
// each is the wire the mutated server would have put out.
func mutationVariants() []variant {
	return []variant{
		{name: "after-wins", fails: []string{"replay.header-wins"},
			request: func(_ *proxy, r *http.Request) {
				if a := r.URL.Query().Get("after"); a != "" && r.Header.Get("Last-Event-ID") != "" {
					r.Header.Set("Last-Event-ID", a)
				}
			}},
		// A service that answers a quick question's POST only once its run has begun. The 202
		// is held until the run has ended, so its first tool call has started however fast or
		// slow the agent is; then as long again and 400 ms more, so that the hold outweighs the
		// half round trip the check allows as slack. (A fixed 400 ms from the POST, as before,
		// caught the defect only when the first call came within about 200 ms.)
		{name: "late-ticket-quick", fails: []string{"ticket.before-tool-call"},
			request: func(p *proxy, r *http.Request) {
				stashQuestion(p, r)
				r.Header.Set("X-Conformance-Received", strconv.FormatInt(time.Now().UnixNano(), 10))
			},
			body: func(p *proxy, r *http.Request, status int, _ http.Header, b []byte) (int, []byte) {
				q := strings.ToLower(r.Header.Get("X-Conformance-Question"))
				if status != http.StatusAccepted || !isOp(r, http.MethodPost, "v1/conversations/*/asks") || strings.HasPrefix(q, "take your time") {
					return status, b
				}
				received, _ := strconv.ParseInt(r.Header.Get("X-Conformance-Received"), 10, 64)
				var tk struct {
					Ticket string `json:"ticket"`
				}
				if json.Unmarshal(b, &tk) == nil && tk.Ticket != "" {
					p.awaitRunEnd(r, tk.Ticket)
				}
				hold := time.Since(time.Unix(0, received)) + 400*time.Millisecond
				select {
				case <-r.Context().Done():
				case <-time.After(hold):
				}
				return status, b
			}},
		{name: "ticket-urls-swapped", fails: []string{"ticket.location"},
			body: editJSON(http.MethodPost, "v1/conversations/*/asks", http.StatusAccepted, func(m map[string]any) {
				m["events_url"], m["status_url"] = m["status_url"], m["events_url"]
			})},
		{name: "problem-status-400", fails: []string{"schema.problem-status"},
			body: func(_ *proxy, _ *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				var m map[string]any
				if !strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") || json.Unmarshal(b, &m) != nil {
					return status, b
				}
				m["status"] = 400
				out, _ := json.Marshal(m)
				return status, out
			}},
		{name: "problem-instance-decoded", fails: []string{"schema.problem-status"},
			body: func(_ *proxy, r *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				var m map[string]any
				if !strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") || json.Unmarshal(b, &m) != nil {
					return status, b
				}
				// what a server putting the decoded path there writes for an id with a space
				m["instance"] = r.URL.Path + "/a b"
				out, _ := json.Marshal(m)
				return status, out
			}},
		{name: "question-in-header", fails: []string{"privacy.question-only-in-accepted"},
			request: stashQuestion,
			body: func(_ *proxy, r *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				if status == http.StatusAccepted && isOp(r, http.MethodPost, "v1/conversations/*/asks") {
					h.Set("X-Ask-Question", r.Header.Get("X-Conformance-Question"))
				}
				return status, b
			}},
		{name: "question-part-in-milestone", fails: []string{"privacy.question-only-in-accepted"},
			frame: editEvents("milestone", func(p *proxy, m map[string]any) {
				q := p.question(m["ticket"].(string))
				m["subject"] = q[:len(q)*2/3]
			})},
		{name: "cursor-before-owner", fails: []string{"ownership.events"},
			intercept: func(_ *proxy, w http.ResponseWriter, r *http.Request) bool {
				if !isOp(r, http.MethodGet, "v1/asks/*/events") {
					return false
				}
				cur := r.Header.Get("Last-Event-ID")
				if cur == "" {
					cur = r.URL.Query().Get("after")
				}
				if n, err := strconv.Atoi(cur); err != nil || n < 999 {
					return false
				}
				problem(w, http.StatusBadRequest)
				return true
			}},
		{name: "head-skips-ownership", fails: []string{"ownership.events", "ownership.status"},
			intercept: func(_ *proxy, w http.ResponseWriter, r *http.Request) bool {
				if r.Method != http.MethodHead || !strings.Contains(r.URL.Path, "/v1/asks/") {
					return false
				}
				ct := "application/json"
				if strings.HasSuffix(r.URL.Path, "/events") {
					ct = "text/event-stream"
				}
				w.Header().Set("Content-Type", ct)
				w.WriteHeader(http.StatusOK)
				return true
			}},
		{name: "head-405", fails: []string{"head.like-get", "ownership.events", "ownership.status"},
			intercept: func(_ *proxy, w http.ResponseWriter, r *http.Request) bool {
				if r.Method != http.MethodHead {
					return false
				}
				w.Header().Set("Allow", "GET")
				problem(w, http.StatusMethodNotAllowed)
				return true
			}},
		{name: "ts-backwards", fails: []string{"events.ts-ordered"},
			frame: editEvents("step", func(_ *proxy, m map[string]any) {
				if ts, err := time.Parse(time.RFC3339Nano, m["ts"].(string)); err == nil {
					m["ts"] = ts.Add(-time.Second).Format(time.RFC3339Nano)
				}
			})},
		{name: "bearer-of-first-caller", fails: []string{"audit.caller-identity"},
			audit: func(m map[string]any) { m["oid"] = "alice" }},
		{name: "bearer-in-milestone", fails: []string{"privacy.no-bearer"},
			frame: func(p *proxy, st *streamState, f sseFrame) []sseFrame {
				return editEvents("milestone", func(_ *proxy, m map[string]any) {
					m["subject"] = m["subject"].(string) + " " + strings.TrimPrefix(st.auth, "Bearer ")
				})(p, st, f)
			}},
	}
}
