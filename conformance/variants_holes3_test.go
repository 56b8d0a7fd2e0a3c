package conformance_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// tickets is what a variant learns of the tickets it relays: which conversation each is in,
// and which have ended (a done was relayed).
type tickets struct {
	mu    sync.Mutex
	conv  map[string]string   // ticket → conversation
	asks  map[string][]string // conversation → tickets
	ended map[string]bool
	ends  map[string]chan struct{} // closed when the ticket's done is relayed
}

func newTickets() *tickets {
	return &tickets{conv: map[string]string{}, asks: map[string][]string{}, ended: map[string]bool{}, ends: map[string]chan struct{}{}}
}

// endOf is closed once t's done has been relayed.
func (k *tickets) endOf(t string) <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.endLocked(t)
}

func (k *tickets) endLocked(t string) chan struct{} {
	ch, ok := k.ends[t]
	if !ok {
		ch = make(chan struct{})
		k.ends[t] = ch
	}
	return ch
}

// learn records what a relayed event says of its ticket.
func (k *tickets) learn(m map[string]any) {
	t, _ := m["ticket"].(string)
	c, _ := m["conversation_id"].(string)
	if t == "" {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.conv[t]; !ok && c != "" {
		k.conv[t] = c
		k.asks[c] = append(k.asks[c], t)
	}
	if m["type"] == "done" && !k.ended[t] {
		k.ended[t] = true
		close(k.endLocked(t))
	}
}

// running reports whether t is a ticket the variant has seen and not seen end.
func (k *tickets) running(t string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, known := k.conv[t]
	return known && !k.ended[t]
}

func (k *tickets) hasEnded(t string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ended[t]
}

func (k *tickets) of(conv string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.asks[conv]...)
}

// watch wraps a frame function so that k learns from every event relayed.
func (k *tickets) watch(next func(*proxy, *streamState, sseFrame) []sseFrame) func(*proxy, *streamState, sseFrame) []sseFrame {
	return func(p *proxy, st *streamState, f sseFrame) []sseFrame {
		if m := f.data(); m != nil {
			k.learn(m)
		}
		if next == nil {
			return []sseFrame{f}
		}
		return next(p, st, f)
	}
}

// ticketOf is the ticket a request under v1/asks/ names, or "".
func ticketOf(r *http.Request) string {
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/ask"), "/"), "/")
	if len(parts) >= 3 && parts[0] == "v1" && parts[1] == "asks" {
		return parts[2]
	}
	return ""
}

// shiftCursor moves a stream request's cursor (header and query) by d.
func shiftCursor(d int64) func(*proxy, *http.Request) {
	return func(_ *proxy, r *http.Request) {
		if !isOp(r, http.MethodGet, "v1/asks/*/events") {
			return
		}
		if n, err := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64); err == nil && n > 0 {
			r.Header.Set("Last-Event-ID", strconv.FormatInt(n+d, 10))
		}
		q := r.URL.Query()
		if n, err := strconv.ParseInt(q.Get("after"), 10, 64); err == nil && n > 0 {
			q.Set("after", strconv.FormatInt(n+d, 10))
			r.URL.RawQuery = q.Encode()
		}
	}
}

// onResume rewrites the frames of streams asked with a cursor; streams from the start pass.
func onResume(f func(st *streamState, fr sseFrame, m map[string]any) []sseFrame) func(*proxy, *streamState, sseFrame) []sseFrame {
	return func(_ *proxy, st *streamState, fr sseFrame) []sseFrame {
		m := fr.data()
		if st.cursor == "" || st.cursor == "0" || m == nil {
			return []sseFrame{fr}
		}
		return f(st, fr, m)
	}
}

// upstreamSeqs reads a finished ticket's retained seqs from the service as the request's
// caller, or nil when the ticket is not finished (or cannot be read).
func (p *proxy) upstreamSeqs(r *http.Request) map[int64]bool {
	base := p.upstream.Scheme + "://" + p.upstream.Host + strings.TrimSuffix(r.URL.Path, "/events")
	get := func(u string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		return http.DefaultClient.Do(req)
	}
	resp, err := get(base)
	if err != nil {
		return nil
	}
	var st struct {
		State string `json:"state"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if st.State == "" || st.State == "running" {
		return nil
	}
	resp, err = get(base + "/events")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	seqs := map[int64]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				seqs[n] = true
			}
		}
	}
	return seqs
}

// holes3Variants are the broken services of the third hole audit: each a defect a real
// implementation could plausibly have, of the stream, ownership, idempotency, privacy, limits
// and cancel. The last fills the limits target's conversations for a TTL.
func holes3Variants() []variant {
	return slices.Concat(streamVariants(), []variant{ticketAfterFirstCall()},
		[]variant{bearerToWebhook("bearer-to-webhook", "Authorization"), bearerToWebhook("bearer-in-webhook-header", "X-Forwarded-Authorization"), questionToWebhook(), hiddenCallAfterCancel()},
		stateVariants())
}

// questionToWebhook sends the ask's question with the run's webhook delivery, in a header
// (the signed body left alone): a service that tells the receiver what was asked.
func questionToWebhook() variant {
	return askToWebhook("question-in-webhook-header", "X-Ask-Subject", func(_ *http.Request, question string) string {
		return url.QueryEscape(question)
	})
}

// bearerToWebhook sends the asking caller's bearer with the run's webhook delivery, in header
// name: a service that passes the caller's credential to every URL it calls for the run.
func bearerToWebhook(name, header string) variant {
	return askToWebhook(name, header, func(r *http.Request, _ string) string { return r.Header.Get("Authorization") })
}

// askToWebhook sends what of says of a createAsk request (r, with its question) with that run's
// webhook delivery, in header; the signed body is left alone.
func askToWebhook(name, header string, of func(r *http.Request, question string) string) variant {
	var mu sync.Mutex
	told := map[string]string{} // webhook path → what of said of its ask
	return variant{name: name, fails: []string{"webhook.delivered-signed"},
		request: func(_ *proxy, r *http.Request) {
			if !isOp(r, http.MethodPost, "v1/conversations/*/asks") {
				return
			}
			body, _ := io.ReadAll(r.Body)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			var m struct {
				Question string `json:"question"`
				Webhook  struct {
					URL string `json:"url"`
				} `json:"webhook"`
			}
			if json.Unmarshal(body, &m) != nil || m.Webhook.URL == "" {
				return
			}
			if u, err := url.Parse(m.Webhook.URL); err == nil {
				mu.Lock()
				told[u.Path] = of(r, m.Question)
				mu.Unlock()
			}
		},
		webhook: func(r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if v, ok := told[r.URL.Path]; ok {
				r.Header.Set(header, v)
			}
		}}
}

// ticketAfterFirstCall holds every 202 until the run's first step is on its stream (read from
// the service itself, a stream that blocks until its next event): the run's first tool call
// made, and audited, since the source writes its audit line before it answers. The handler runs
// the agent until its first tool call has been made, then answers. A run that ends without a
// call, or makes none within 5 s, gets its 202 then.
func ticketAfterFirstCall() variant {
	return variant{name: "ticket-after-first-call", fails: []string{"ticket.before-tool-call"},
		body: func(p *proxy, r *http.Request, status int, _ http.Header, b []byte) (int, []byte) {
			if status != http.StatusAccepted || !isOp(r, http.MethodPost, "v1/conversations/*/asks") {
				return status, b
			}
			var tk struct {
				Ticket string `json:"ticket"`
			}
			if json.Unmarshal(b, &tk) != nil || tk.Ticket == "" {
				return status, b
			}
			ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
			defer cancel()
			awaitFirstStep(ctx, p.upstream.String()+"/v1/asks/"+url.PathEscape(tk.Ticket)+"/events", r.Header.Get("Authorization"))
			return status, b
		}}
}

// awaitFirstStep reads the event stream at events with the bearer auth until its first step,
// its done, its end or ctx's.
func awaitFirstStep(ctx context.Context, events, auth string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, events, nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok && (ev == "step" || ev == "done") {
			return
		}
	}
}

// streamVariants break resumes, keep-alives and stream headers.
func streamVariants() []variant {
	return []variant{
		// Resume: Last-Event-ID n replays from n, so the last event seen comes again.
		{name: "resume-repeats-last", fails: []string{"replay.header-after-done", "replay.query-after-done", "replay.during-run"}, request: shiftCursor(-1)},
		// Resume: Last-Event-ID n replays from n+2 (an index off by one), one event lost.
		{name: "resume-skips-one", fails: []string{"replay.header-after-done", "replay.during-run"}, request: shiftCursor(+1)},
		// Resume from a seq the bound evicted: the log has no such entry, and the service
		// starts over from seq 1 rather than after the cursor.
		{name: "resume-from-evicted-restarts", fails: []string{"replay.header-after-done", "replay.query-after-done"}, request: func(p *proxy, r *http.Request) {
			if !isOp(r, http.MethodGet, "v1/asks/*/events") {
				return
			}
			cur := r.Header.Get("Last-Event-ID")
			if cur == "" {
				cur = r.URL.Query().Get("after")
			}
			n, err := strconv.ParseInt(cur, 10, 64)
			if err != nil || n <= 0 {
				return
			}
			seqs := p.upstreamSeqs(r)
			if seqs == nil || seqs[n] {
				return
			}
			last := int64(0)
			for q := range seqs {
				last = max(last, q)
			}
			if n > last {
				return
			}
			r.Header.Del("Last-Event-ID")
			q := r.URL.Query()
			q.Del("after")
			r.URL.RawQuery = q.Encode()
		}},
		// A keep-alive that carries an id (the next seq): a browser takes it as the last event
		// id, and its reconnect skips the event that had that seq.
		{name: "keepalive-with-id", fails: []string{"events.sse-framing"}, frame: func(_ *proxy, st *streamState, f sseFrame) []sseFrame {
			if f.comment() && strings.Contains(f.lines[0], "keepalive") {
				return []sseFrame{{lines: append(append([]string(nil), f.lines...), "id: "+strconv.FormatInt(st.lastSeq+1, 10))}}
			}
			return []sseFrame{f}
		}},
		// On a resumed stream, the outcome again after done.
		{name: "outcome-after-done-on-resume", fails: []string{"replay.header-after-done", "replay.during-run"}, frame: func() func(*proxy, *streamState, sseFrame) []sseFrame {
			var terminal perStream[map[string]any]
			return onResume(func(st *streamState, f sseFrame, m map[string]any) []sseFrame {
				switch m["type"] {
				case "answer", "abstention", "refusal", "error":
					*terminal.of(st) = m
				case "done":
					if t := *terminal.of(st); t != nil {
						again := map[string]any{}
						for k, v := range t {
							again[k] = v
						}
						again["seq"] = m["seq"].(float64) + 1
						return []sseFrame{f, eventFrame(again)}
					}
				}
				return []sseFrame{f}
			})
		}()},
		// On a resumed stream, done twice (the reconnect's replay and the live tail both send it).
		{name: "two-dones-on-resume", fails: []string{"replay.header-after-done"}, frame: onResume(func(_ *streamState, f sseFrame, m map[string]any) []sseFrame {
			if m["type"] == "done" {
				return []sseFrame{f, f}
			}
			return []sseFrame{f}
		})},
		// On a resumed stream, no done: the replay path forgets it and just closes.
		{name: "done-missing-on-resume", fails: []string{"replay.header-after-done", "replay.during-run"}, frame: onResume(func(_ *streamState, f sseFrame, m map[string]any) []sseFrame {
			if m["type"] == "done" {
				return nil
			}
			return []sseFrame{f}
		})},
		// No Cache-Control on a resumed stream (its headers set on the live path only).
		{name: "resume-cacheable", fails: []string{"events.stream-headers"}, streamHeader: func(_ *proxy, r *http.Request, h http.Header) {
			if r.Header.Get("Last-Event-ID") != "" || r.URL.Query().Get("after") != "" {
				h.Del("Cache-Control")
			}
		}},
	}
}

// stateVariants need what they learn of the tickets they relay.
func stateVariants() []variant {
	preferLeak, cancelLeak, whose, listing, finishedNoAccel, cancelLate, busy := newTickets(), newTickets(), newTickets(), newTickets(), newTickets(), newTickets(), newTickets()
	askKeys := &keyCache{seen: map[string]cachedResponse{}}
	var lateMu sync.Mutex
	pendingCancel := map[string]string{} // ticket → bearer of a cancel not yet passed on
	return []variant{
		// No X-Accel-Buffering on the stream of a ticket that has ended (set on the live path only).
		{name: "finished-stream-buffered", fails: []string{"events.stream-headers"}, frame: finishedNoAccel.watch(nil),
			streamHeader: func(_ *proxy, r *http.Request, h http.Header) {
				if finishedNoAccel.hasEnded(ticketOf(r)) {
					h.Del("X-Accel-Buffering")
				}
			}},
		// A foreign caller's Prefer: wait on a running ticket waits for its end before the
		// 404: the 404's timing tells that the ticket exists and is running.
		{name: "foreign-prefer-wait-leaks", fails: []string{"ownership.status", "ownership.tenant"}, frame: preferLeak.watch(nil),
			body: func(_ *proxy, r *http.Request, status int, _ http.Header, b []byte) (int, []byte) {
				if status != http.StatusNotFound || !isOp(r, http.MethodGet, "v1/asks/*") || !strings.Contains(r.Header.Get("Prefer"), "wait") {
					return status, b
				}
				if t := ticketOf(r); preferLeak.running(t) {
					select { // the leak: the 404 waits for the ticket's end, up to 2 s
					case <-preferLeak.endOf(t):
					case <-time.After(2 * time.Second):
					case <-r.Context().Done():
					}
				}
				return status, b
			}},
		// A foreign caller's cancel of a running ticket: 404, but with a Retry-After the 404 of
		// a missing ticket does not have.
		{name: "foreign-cancel-leaks-running", fails: []string{"ownership.cancel"}, frame: cancelLeak.watch(nil),
			body: func(_ *proxy, r *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				if status == http.StatusNotFound && isOp(r, http.MethodPost, "v1/asks/*/cancel") && cancelLeak.running(ticketOf(r)) {
					h.Set("Retry-After", "1")
				}
				return status, b
			}},
		// A 404 for someone else's ticket that says so.
		{name: "foreign-404-says-whose", fails: []string{"ownership.status", "ownership.cancel"}, frame: whose.watch(nil),
			body: func(_ *proxy, r *http.Request, status int, _ http.Header, b []byte) (int, []byte) {
				t := ticketOf(r)
				if status != http.StatusNotFound || t == "" {
					return status, b
				}
				whose.mu.Lock()
				_, known := whose.conv[t]
				whose.mu.Unlock()
				if !known {
					return status, b
				}
				var m map[string]any
				if json.Unmarshal(b, &m) != nil {
					return status, b
				}
				m["detail"] = "the ask belongs to another identity"
				out, _ := json.Marshal(m)
				return status, out
			}},
		// GET on a conversation's asks lists its tickets, to anyone.
		{name: "conversation-listing-leaks", fails: []string{"ownership.conversation"}, frame: listing.watch(nil),
			intercept: func(_ *proxy, w http.ResponseWriter, r *http.Request) bool {
				if !isOp(r, http.MethodGet, "v1/conversations/*/asks") {
					return false
				}
				conv := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/ask"), "/"), "/")[2]
				ts := listing.of(conv)
				if len(ts) == 0 {
					return false
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusOK)
				_ = json.NewEncoder(w).Encode(map[string]any{"conversation_id": conv, "tickets": ts})
				return true
			}},
		// The conversation's busy state judged before its owner: anyone asking in a conversation
		// where an ask runs gets the 409 naming the running ticket.
		{name: "busy-before-owner", fails: []string{"ownership.conversation"}, frame: busy.watch(nil),
			intercept: func(_ *proxy, w http.ResponseWriter, r *http.Request) bool {
				if !isOp(r, http.MethodPost, "v1/conversations/*/asks") {
					return false
				}
				conv := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, "/ask"), "/"), "/")[2]
				for _, t := range busy.of(conv) {
					if busy.running(t) {
						w.Header().Set("Content-Type", "application/problem+json")
						w.WriteHeader(http.StatusConflict)
						_ = json.NewEncoder(w).Encode(map[string]any{"type": "urn:ask:problem:conversation-busy", "title": "Conflict", "status": 409, "ticket": t})
						return true
					}
				}
				return false
			}},
		// The service calls the sources with its own credential, not the caller's bearer.
		{name: "service-token-to-source", fails: []string{"audit.caller-identity"}, audit: func(m map[string]any) { m["oid"] = "ask-service" }},
		// A replayed createAsk answers 200, not the first answer's 202.
		{name: "idempotent-replay-200", fails: []string{"create.idempotency-key"},
			body: func(_ *proxy, r *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				if status == http.StatusAccepted && isOp(r, http.MethodPost, "v1/conversations/*/asks") && h.Get("Idempotent-Replayed") != "" {
					return http.StatusOK, b
				}
				return status, b
			}},
		// A replay without Idempotent-Replayed.
		{name: "no-idempotent-replayed", fails: []string{"create.idempotency-scope"},
			body: func(_ *proxy, _ *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				h.Del("Idempotent-Replayed")
				return status, b
			}},
		// createAsk's keys global (createConversation's each caller's own): B sending A's ask
		// key in B's own conversation gets A's ticket back.
		{name: "ask-keys-across-identities", fails: []string{"create.idempotency-scope"},
			// The key is looked up with the body's fingerprint, not the caller's or the path's.
			intercept: func(p *proxy, w http.ResponseWriter, r *http.Request) bool {
				if !isOp(r, http.MethodPost, "v1/conversations/*/asks") || r.Header.Get("Idempotency-Key") == "" {
					return false
				}
				body, _ := io.ReadAll(r.Body)
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
				r.Header.Set("Idempotency-Key", r.Header.Get("Idempotency-Key")+"\x00"+string(body))
				hit := askKeys.intercept(p, w, r)
				r.Header.Set("Idempotency-Key", strings.SplitN(r.Header.Get("Idempotency-Key"), "\x00", 2)[0])
				r.Header.Set("X-Conformance-Body", string(body))
				return hit
			},
			body: func(p *proxy, r *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				if !isOp(r, http.MethodPost, "v1/conversations/*/asks") || r.Header.Get("Idempotency-Key") == "" {
					return status, b
				}
				key := r.Header.Get("Idempotency-Key")
				r.Header.Set("Idempotency-Key", key+"\x00"+r.Header.Get("X-Conformance-Body"))
				defer r.Header.Set("Idempotency-Key", key)
				return askKeys.store(p, r, status, h, b)
			}},
		// 404s as application/json rather than problem+json.
		{name: "not-found-as-json", fails: []string{"ownership.events", "ownership.conversation"},
			body: func(_ *proxy, _ *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				if status == http.StatusNotFound {
					h.Set("Content-Type", "application/json")
				}
				return status, b
			}},
		// A 429 whose problem says 503 (one "busy" problem for both).
		{name: "429-problem-says-503", fails: []string{"limits.inflight-429"},
			body: func(_ *proxy, _ *http.Request, status int, _ http.Header, b []byte) (int, []byte) {
				var m map[string]any
				if status != http.StatusTooManyRequests || json.Unmarshal(b, &m) != nil {
					return status, b
				}
				m["status"] = 503
				out, _ := json.Marshal(m)
				return status, out
			}},
		// A 429 whose problem quotes the ask it refused.
		{name: "429-quotes-the-question", fails: []string{"limits.inflight-429"}, request: stashQuestion,
			body: func(_ *proxy, r *http.Request, status int, _ http.Header, b []byte) (int, []byte) {
				var m map[string]any
				if status != http.StatusTooManyRequests || json.Unmarshal(b, &m) != nil {
					return status, b
				}
				m["detail"] = "too many asks running; not admitted: " + r.Header.Get("X-Conformance-Question")
				out, _ := json.Marshal(m)
				return status, out
			}},
		// Keep-alives on the live path only: a stream resumed with a cursor gets none.
		{name: "no-keepalive-on-resume", fails: []string{"stream.keepalive"},
			frame: func(_ *proxy, st *streamState, f sseFrame) []sseFrame {
				if f.comment() && st.cursor != "" && st.cursor != "0" && strings.Contains(f.lines[0], "keepalive") {
					return nil
				}
				return []sseFrame{f}
			}},
		// A keep-alive that says whose stream it is: the caller's bearer in a comment.
		{name: "bearer-in-keepalive", fails: []string{"privacy.no-bearer"},
			frame: func(_ *proxy, st *streamState, f sseFrame) []sseFrame {
				if f.comment() && strings.Contains(f.lines[0], "keepalive") {
					return []sseFrame{{lines: []string{": keepalive for " + st.auth}}}
				}
				return []sseFrame{f}
			}},
		// The stream's opening comment names the question it streams.
		{name: "question-in-comment", fails: []string{"privacy.question-only-in-accepted"},
			frame: func(p *proxy, st *streamState, f sseFrame) []sseFrame {
				if m := f.data(); m != nil && m["type"] == "accepted" {
					return []sseFrame{{lines: []string{": events of " + p.question(m["ticket"].(string))}}, f}
				}
				return []sseFrame{f}
			}},
		// A body taken for JSON whatever its Content-Type says.
		{name: "content-type-ignored", fails: []string{"ask.bad-input-400"},
			request: func(_ *proxy, r *http.Request) {
				if r.Method == http.MethodPost && r.Header.Get("Content-Type") != "" {
					r.Header.Set("Content-Type", "application/json")
				}
			}},
		// retry: 0, so every client of a broken stream reconnects at once, over and over.
		{name: "retry-zero", fails: []string{"events.sse-framing"},
			frame: func(_ *proxy, _ *streamState, f sseFrame) []sseFrame {
				g := sseFrame{lines: append([]string(nil), f.lines...)}
				for i, l := range g.lines {
					if strings.HasPrefix(l, "retry:") {
						g.lines[i] = "retry: 0"
					}
				}
				return []sseFrame{g}
			}},
		// The question, URL-encoded, in the 202's Location.
		{name: "question-encoded-in-location", fails: []string{"ticket.location", "privacy.question-only-in-accepted"}, request: stashQuestion,
			body: func(_ *proxy, r *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				if status == http.StatusAccepted && isOp(r, http.MethodPost, "v1/conversations/*/asks") {
					h.Set("Location", h.Get("Location")+"?q="+url.QueryEscape(r.Header.Get("X-Conformance-Question")))
				}
				return status, b
			}},
		// The question, URL-encoded, in a step's args (a search URL the agent built from it).
		{name: "question-encoded-in-step", fails: []string{"privacy.question-only-in-accepted"},
			frame: editEvents("step", func(p *proxy, m map[string]any) {
				args, _ := m["args"].(map[string]any)
				if args == nil {
					args = map[string]any{}
				}
				args["url"] = "https://catalog.example/search?q=" + url.QueryEscape(p.question(m["ticket"].(string)))
				m["args"] = args
			})},
		// An error's message quoting most of the question.
		{name: "question-part-in-error", fails: []string{"privacy.question-only-in-accepted"},
			frame: editEvents("error", func(p *proxy, m map[string]any) {
				q := p.question(m["ticket"].(string))
				m["message"] = "the ask \"" + q[:len(q)*2/3] + "…\" was " + m["kind"].(string)
			})},
		// A cancel that takes effect only after the run's next tool call: a milestone and a
		// step come after the cancel's 202.
		{name: "step-after-cancel", fails: []string{"cancel.stops-run"},
			intercept: func(_ *proxy, w http.ResponseWriter, r *http.Request) bool {
				if !isOp(r, http.MethodPost, "v1/asks/*/cancel") || cancelLate.hasEnded(ticketOf(r)) {
					return false
				}
				lateMu.Lock()
				pendingCancel[ticketOf(r)] = r.Header.Get("Authorization")
				lateMu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusAccepted)
				_ = json.NewEncoder(w).Encode(map[string]any{"ticket": ticketOf(r), "state": "running"})
				return true
			},
			frame: cancelLate.watch(func(p *proxy, _ *streamState, f sseFrame) []sseFrame {
				m := f.data()
				if m == nil || m["type"] != "step" {
					return []sseFrame{f}
				}
				t := m["ticket"].(string)
				lateMu.Lock()
				auth, ok := pendingCancel[t]
				delete(pendingCancel, t)
				lateMu.Unlock()
				if ok {
					req, err := http.NewRequest(http.MethodPost, p.upstream.String()+"/v1/asks/"+t+"/cancel", nil)
					if err == nil {
						req.Header.Set("Authorization", auth)
						if resp, err := http.DefaultClient.Do(req); err == nil {
							resp.Body.Close()
						}
					}
				}
				return []sseFrame{f}
			})},
		// The status's terminal assembled apart from the log: an answer without its caveats.
		{name: "status-terminal-stale", fails: []string{"status.agrees-with-stream"},
			body: editJSON(http.MethodGet, "v1/asks/*", http.StatusOK, func(m map[string]any) {
				if t, ok := m["terminal"].(map[string]any); ok && t["type"] == "answer" {
					t["caveats"] = []any{}
				}
			})},
		// The status's last_seq one short of done's.
		{name: "status-last-seq-short", fails: []string{"status.agrees-with-stream"},
			body: editJSON(http.MethodGet, "v1/asks/*", http.StatusOK, func(m map[string]any) {
				if n, ok := m["last_seq"].(float64); ok && m["state"] != "running" {
					m["last_seq"] = n - 1
				}
			})},
		// 503 without Retry-After. Last: it fills the limits target's conversations for a TTL.
		{name: "503-without-retry-after", fails: []string{"limits.capacity-503"},
			body: func(_ *proxy, _ *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				if status == http.StatusServiceUnavailable {
					h.Del("Retry-After")
				}
				return status, b
			}},
	}
}

// hiddenCallAfterCancel is a cancel that stops the run only after its next tool call, whose
// milestone and step the service then leaves out of the log (the run counted as cancelled
// before them): the stream, the status and done are renumbered to match, so only the source's
// audit log shows a call that started after the cancel was answered.
func hiddenCallAfterCancel() variant {
	var mu sync.Mutex
	owner := map[string]string{}    // ticket → the bearer that read its first stream
	ended := map[string]bool{}      // tickets whose done was relayed
	atCancel := map[string]int64{}  // ticket → the last seq relayed when its cancel was answered
	maxSeq := map[string]int64{}    // ticket → the last seq relayed
	pending := map[string]string{}  // ticket → bearer of a cancel not yet passed on
	hidden := map[string][]int64{}  // ticket → seqs left out
	hiddenSteps := map[string]int{} // ticket → steps among them
	shift := func(t string, seq int64) int64 {
		n := int64(0)
		for _, h := range hidden[t] {
			if h < seq {
				n++
			}
		}
		return n
	}
	return variant{name: "hidden-call-after-cancel", fails: []string{"cancel.stops-run"},
		intercept: func(_ *proxy, w http.ResponseWriter, r *http.Request) bool {
			t := ticketOf(r)
			if !isOp(r, http.MethodPost, "v1/asks/*/cancel") {
				return false
			}
			mu.Lock()
			mine := owner[t] != "" && owner[t] == r.Header.Get("Authorization") && !ended[t]
			if mine {
				if _, ok := atCancel[t]; !ok {
					atCancel[t], pending[t] = maxSeq[t], r.Header.Get("Authorization")
				}
			}
			mu.Unlock()
			if !mine {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_ = json.NewEncoder(w).Encode(map[string]any{"ticket": t, "state": "running"})
			return true
		},
		frame: func(p *proxy, st *streamState, f sseFrame) []sseFrame {
			m := f.data()
			if m == nil {
				return []sseFrame{f}
			}
			t, _ := m["ticket"].(string)
			seq := int64(m["seq"].(float64))
			mu.Lock()
			defer mu.Unlock()
			if owner[t] == "" {
				owner[t] = st.auth
			}
			maxSeq[t] = max(maxSeq[t], seq)
			ended[t] = ended[t] || m["type"] == "done"
			if slices.Contains(hidden[t], seq) {
				return nil
			}
			if at, ok := atCancel[t]; ok && seq > at && (m["type"] == "milestone" || m["type"] == "step") {
				hidden[t] = append(hidden[t], seq)
				if m["type"] == "step" {
					hiddenSteps[t]++
					if auth, ok := pending[t]; ok {
						delete(pending, t)
						req, err := http.NewRequest(http.MethodPost, p.upstream.String()+"/v1/asks/"+t+"/cancel", nil)
						if err == nil {
							req.Header.Set("Authorization", auth)
							if resp, err := http.DefaultClient.Do(req); err == nil {
								resp.Body.Close()
							}
						}
					}
				}
				return nil
			}
			n := shift(t, seq)
			if n == 0 {
				return []sseFrame{f}
			}
			m["seq"] = float64(seq - n)
			if m["type"] == "done" {
				m["steps"] = m["steps"].(float64) - float64(hiddenSteps[t])
			}
			return []sseFrame{eventFrame(m)}
		},
		body: editJSON(http.MethodGet, "v1/asks/*", http.StatusOK, func(m map[string]any) {
			t, _ := m["ticket"].(string)
			mu.Lock()
			defer mu.Unlock()
			n := float64(len(hidden[t]))
			if n == 0 {
				return
			}
			if v, ok := m["last_seq"].(float64); ok {
				m["last_seq"] = v - n
			}
			for _, k := range []string{"terminal", "done"} {
				if e, ok := m[k].(map[string]any); ok {
					e["seq"] = e["seq"].(float64) - n
					if k == "done" {
						e["steps"] = e["steps"].(float64) - float64(hiddenSteps[t])
					}
				}
			}
		})}
}
