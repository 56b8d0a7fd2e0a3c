package conformance_test

import (
	"net/http"
	"strings"
	"sync"
	"time"
)

// perStream keeps one value per relayed stream for a variant's frame function.
type perStream[T any] struct {
	mu sync.Mutex
	m  map[*streamState]*T
}

func (p *perStream[T]) of(st *streamState) *T {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[*streamState]*T{}
	}
	v, ok := p.m[st]
	if !ok {
		v = new(T)
		p.m[st] = v
	}
	return v
}

// dropFirstStep drops the first step of every stream, live and replayed: a service that loses
// an event in a run far shorter than its buffer, while done.steps still counts it.
func dropFirstStep() func(*proxy, *streamState, sseFrame) []sseFrame {
	var dropped perStream[bool]
	return func(_ *proxy, st *streamState, f sseFrame) []sseFrame {
		if m := f.data(); m != nil && m["type"] == "step" {
			if d := dropped.of(st); !*d {
				*d = true
				return nil
			}
		}
		return []sseFrame{f}
	}
}

// hideFirstCall hides a run's first tool call altogether, from every stream read from the
// start: its step is dropped, every later seq is renumbered to close the gap, and done.steps no
// longer counts it. The stream is self-consistent; only the source's audit log shows the call.
func hideFirstCall() func(*proxy, *streamState, sseFrame) []sseFrame {
	type state struct{ fromStart, hidden bool }
	var streams perStream[state]
	return func(_ *proxy, st *streamState, f sseFrame) []sseFrame {
		m := f.data()
		if m == nil {
			return []sseFrame{f}
		}
		s := streams.of(st)
		if m["type"] == "accepted" && m["seq"].(float64) == 1 {
			s.fromStart = true
		}
		if !s.fromStart {
			return []sseFrame{f}
		}
		if m["type"] == "step" && !s.hidden {
			s.hidden = true
			return nil
		}
		if !s.hidden {
			return []sseFrame{f}
		}
		m["seq"] = m["seq"].(float64) - 1
		if m["type"] == "done" {
			m["steps"] = m["steps"].(float64) - 1
		}
		return []sseFrame{eventFrame(m)}
	}
}

// holeVariants are the broken services of issue 23: each a defect the suite once passed.
func holeVariants(_ time.Duration) []variant {
	globalKeys := &keyCache{seen: map[string]cachedResponse{}}
	return []variant{
		{name: "drop-a-step", fails: []string{"events.seq-gap-free", "audit.every-call-streamed"},
			frame: dropFirstStep()},
		{name: "hide-a-call", fails: []string{"audit.every-call-streamed"},
			frame: hideFirstCall()},
		{name: "json-not-the-yaml", fails: []string{"schema.json-equals-yaml"},
			body: editJSON(http.MethodGet, "v1/openapi.json", http.StatusOK, func(m map[string]any) {
				delete(m["components"].(map[string]any)["schemas"].(map[string]any), "EventType")
			})},
		{name: "challenge-without-error", fails: []string{"auth.malformed-bearer"},
			body: func(_ *proxy, _ *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				if status == http.StatusUnauthorized {
					h.Set("WWW-Authenticate", `Bearer realm="das"`)
				}
				return status, b
			}},
		{name: "bad-id-404", fails: []string{"input.bad-ids-400"},
			body: func(_ *proxy, r *http.Request, status int, _ http.Header, b []byte) (int, []byte) {
				if status != http.StatusBadRequest || !strings.Contains(r.URL.EscapedPath(), "%21") {
					return status, b
				}
				return http.StatusNotFound, []byte(`{"type":"about:blank","title":"Not Found","status":404}`)
			}},
		{name: "idempotency-across-identities", fails: []string{"create.idempotency-scope"},
			intercept: globalKeys.intercept, body: globalKeys.store},
		{name: "no-location", fails: []string{"ticket.location"},
			body: func(_ *proxy, _ *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				h.Del("Location")
				return status, b
			}},
		{name: "413-as-400", fails: []string{"limits.body-413"},
			body: func(_ *proxy, _ *http.Request, status int, _ http.Header, b []byte) (int, []byte) {
				if status != http.StatusRequestEntityTooLarge {
					return status, b
				}
				return http.StatusBadRequest, []byte(`{"type":"about:blank","title":"Bad Request","status":400}`)
			}},
		{name: "429-without-retry-after", fails: []string{"limits.inflight-429"},
			body: func(_ *proxy, _ *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				if status == http.StatusTooManyRequests {
					h.Del("Retry-After")
				}
				return status, b
			}},
		{name: "429-retry-after-0", fails: []string{"limits.inflight-429"},
			body: func(_ *proxy, _ *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				if status == http.StatusTooManyRequests {
					h.Set("Retry-After", "0") // "retry at once", into the same refusal
				}
				return status, b
			}},
		{name: "deadline-never-fires", fails: []string{"run.deadline-timeout"},
			frame: func() func(*proxy, *streamState, sseFrame) []sseFrame {
				var timedOut perStream[bool]
				return func(_ *proxy, st *streamState, f sseFrame) []sseFrame {
					m := f.data()
					if t := timedOut.of(st); *t || (m != nil && m["type"] == "error" && m["kind"] == "timeout") {
						*t = true
						return nil
					}
					return []sseFrame{f}
				}
			}()},
		{name: "ttl-never-expires", fails: []string{"ticket.ttl-expiry"},
			body: func() func(*proxy, *http.Request, int, http.Header, []byte) (int, []byte) {
				var mu sync.Mutex
				seen := map[string][]byte{}
				return func(_ *proxy, r *http.Request, status int, h http.Header, b []byte) (int, []byte) {
					if !isOp(r, http.MethodGet, "v1/asks/*") {
						return status, b
					}
					mu.Lock()
					defer mu.Unlock()
					if status == http.StatusOK {
						seen[r.URL.Path] = b
					} else if old, ok := seen[r.URL.Path]; ok && status == http.StatusNotFound {
						h.Set("Content-Type", "application/json")
						return http.StatusOK, old
					}
					return status, b
				}
			}()},
		// Last: it fills the limits target's conversations for a TTL.
		{name: "500-for-503", fails: []string{"limits.capacity-503"},
			body: func(_ *proxy, _ *http.Request, status int, _ http.Header, b []byte) (int, []byte) {
				if status != http.StatusServiceUnavailable {
					return status, b
				}
				return http.StatusInternalServerError, []byte(`{"type":"about:blank","title":"Internal Server Error","status":500}`)
			}},
	}
}

// keyCache answers a repeated Idempotency-Key with the first response, whoever asks: a service
// whose keys are global rather than each caller's own.
type keyCache struct {
	mu   sync.Mutex
	seen map[string]cachedResponse
}

type cachedResponse struct {
	status int
	header http.Header
	body   []byte
}

func (k *keyCache) intercept(_ *proxy, w http.ResponseWriter, r *http.Request) bool {
	key := r.Header.Get("Idempotency-Key")
	if r.Method != http.MethodPost || key == "" {
		return false
	}
	k.mu.Lock()
	c, ok := k.seen[key]
	k.mu.Unlock()
	if !ok {
		return false
	}
	for h, vs := range c.header {
		w.Header()[h] = vs
	}
	w.Header().Set("Idempotent-Replayed", "true")
	w.WriteHeader(c.status)
	_, _ = w.Write(c.body)
	return true
}

func (k *keyCache) store(_ *proxy, r *http.Request, status int, h http.Header, b []byte) (int, []byte) {
	if key := r.Header.Get("Idempotency-Key"); r.Method == http.MethodPost && key != "" && status < 300 {
		k.mu.Lock()
		k.seen[key] = cachedResponse{status: status, header: h.Clone(), body: b}
		k.mu.Unlock()
	}
	return status, b
}
