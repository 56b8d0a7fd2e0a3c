package conformance_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/conformance"
	"github.com/das-ask/ask/demo/idp"
)

// remint replaces the request's bearer by a genuine token the IdP mints with the claims fix
// returns, as a service that skipped a validation step would behave. A bearer that does not
// parse is left alone.
func remint(fix func(c jwt.MapClaims) (idp.Claims, bool)) func(p *proxy, r *http.Request) {
	return func(p *proxy, r *http.Request) {
		tok, ok := auth.BearerToken(r)
		if !ok {
			return
		}
		parsed, _, err := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{})
		if err != nil {
			return
		}
		c, ok := fix(parsed.Claims.(jwt.MapClaims))
		if !ok {
			return
		}
		fresh, err := p.idp.Mint(c)
		if err != nil {
			p.t.Errorf("remint: %v", err)
			return
		}
		r.Header.Set("Authorization", "Bearer "+fresh)
	}
}

func claimsOf(c jwt.MapClaims) idp.Claims {
	oid, _ := c["oid"].(string)
	aud, _ := c.GetAudience()
	exp, _ := c.GetExpirationTime()
	out := idp.Claims{OID: oid, Expired: exp != nil && exp.Before(time.Now())}
	if len(aud) > 0 {
		out.Audience = aud[0]
	}
	return out
}

// variants are the broken services; every check must fail against at least one.
func variants(slowWait time.Duration) []variant {
	return []variant{
		{name: "no-challenge", fails: []string{"auth.no-bearer", "auth.malformed-bearer"},
			body: func(_ *proxy, _ *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				h.Del("WWW-Authenticate")
				return status, b
			}},
		{name: "accept-forged", fails: []string{"auth.forged-bearer"},
			request: remint(func(c jwt.MapClaims) (idp.Claims, bool) { return claimsOf(c), true })},
		{name: "accept-expired", fails: []string{"auth.expired-bearer"},
			request: remint(func(c jwt.MapClaims) (idp.Claims, bool) {
				cl := claimsOf(c)
				was := cl.Expired
				cl.Expired = false
				return cl, was
			})},
		{name: "accept-any-audience", fails: []string{"auth.wrong-audience"},
			request: remint(func(c jwt.MapClaims) (idp.Claims, bool) {
				cl := claimsOf(c)
				was := cl.Audience != "das"
				cl.Audience = "das"
				return cl, was
			})},
		{name: "schema-behind-auth", fails: []string{"schema.published"},
			intercept: func(_ *proxy, w http.ResponseWriter, r *http.Request) bool {
				if !strings.HasSuffix(r.URL.Path, "/v1/openapi.yaml") || r.Header.Get("Authorization") != "" {
					return false
				}
				w.Header().Set("WWW-Authenticate", "Bearer")
				problem(w, http.StatusUnauthorized)
				return true
			}},
		{name: "forbidden-not-404", fails: []string{"ownership.events", "ownership.status", "ownership.cancel", "ownership.conversation"},
			body: func(_ *proxy, _ *http.Request, status int, _ http.Header, b []byte) (int, []byte) {
				if status != http.StatusNotFound {
					return status, b
				}
				return http.StatusForbidden, []byte(`{"type":"about:blank","title":"Forbidden","status":403}`)
			}},
		{name: "tenant-blind", fails: []string{"ownership.tenant"},
			// A service that owns work by oid alone: A's oid in another tenant is taken for A
			// (the proxy hands the service A's own token in its place).
			request: remint(func(c jwt.MapClaims) (idp.Claims, bool) {
				tid, _ := c["tid"].(string)
				return claimsOf(c), tid == conformance.OtherTenantID
			})},
		{name: "late-ticket", fails: []string{"ticket.before-tool-call"},
			body: func(_ *proxy, r *http.Request, status int, _ http.Header, b []byte) (int, []byte) {
				if status == http.StatusAccepted && isOp(r, http.MethodPost, "v1/conversations/*/asks") {
					select {
					case <-r.Context().Done():
					case <-time.After(slowWait + 300*time.Millisecond):
					}
				}
				return status, b
			}},
		{name: "drop-accepted", fails: []string{"events.first-accepted"},
			frame: func(_ *proxy, _ *streamState, f sseFrame) []sseFrame {
				if m := f.data(); m != nil && m["type"] == "accepted" {
					return nil
				}
				return []sseFrame{f}
			}},
		{name: "skip-seq", fails: []string{"events.seq-gap-free"},
			frame: editEvents("", func(_ *proxy, m map[string]any) {
				if seq := m["seq"].(float64); seq >= 2 {
					m["seq"] = seq + 1
				}
			})},
		{name: "unnamed-events", fails: []string{"events.sse-framing"},
			frame: func(_ *proxy, _ *streamState, f sseFrame) []sseFrame {
				var g sseFrame
				for _, l := range f.lines {
					if !strings.HasPrefix(l, "event:") {
						g.lines = append(g.lines, l)
					}
				}
				return []sseFrame{g}
			}},
		{name: "cacheable-stream", fails: []string{"events.stream-headers"},
			header: func(h http.Header) {
				h.Set("Cache-Control", "public, max-age=60")
				h.Del("X-Accel-Buffering")
			}},
		{name: "ignore-last-event-id", fails: []string{"replay.header-after-done", "replay.during-run"},
			request: func(_ *proxy, r *http.Request) { r.Header.Del("Last-Event-ID") }},
		{name: "ignore-after", fails: []string{"replay.query-after-done"},
			request: func(_ *proxy, r *http.Request) {
				q := r.URL.Query()
				q.Del("after")
				r.URL.RawQuery = q.Encode()
			}},
		{name: "lenient-cursor", fails: []string{"replay.bad-cursor"},
			request: func(_ *proxy, r *http.Request) {
				digits := regexp.MustCompile(`^[0-9]+$`)
				if v := r.Header.Get("Last-Event-ID"); v != "" && !digits.MatchString(v) {
					r.Header.Del("Last-Event-ID")
				}
				q := r.URL.Query()
				if v := q.Get("after"); v != "" && !digits.MatchString(v) {
					q.Del("after")
					r.URL.RawQuery = q.Encode()
				}
			}},
		{name: "no-keepalive", fails: []string{"stream.keepalive"},
			frame: func(_ *proxy, _ *streamState, f sseFrame) []sseFrame {
				if f.comment() {
					return nil
				}
				return []sseFrame{f}
			}},
		{name: "no-conflict", fails: []string{"conversation.busy-409"},
			body: func(_ *proxy, r *http.Request, status int, _ http.Header, b []byte) (int, []byte) {
				if status == http.StatusConflict {
					return http.StatusServiceUnavailable, []byte(`{"type":"about:blank","title":"Service Unavailable","status":503}`)
				}
				return status, b
			}},
		{name: "cancel-ignored", fails: []string{"cancel.stops-run"},
			intercept: func(_ *proxy, w http.ResponseWriter, r *http.Request) bool {
				if !isOp(r, http.MethodPost, "v1/asks/*/cancel") {
					return false
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusAccepted)
				_ = json.NewEncoder(w).Encode(map[string]any{"ticket": strings.Split(r.URL.Path, "/")[4], "state": "running"})
				return true
			}},
		{name: "cancel-twice-conflict", fails: []string{"cancel.idempotent"},
			intercept: func(p *proxy, w http.ResponseWriter, r *http.Request) bool {
				if !isOp(r, http.MethodPost, "v1/asks/*/cancel") || !p.remember("cancel "+r.URL.Path) {
					return false
				}
				problem(w, http.StatusConflict)
				return true
			}},
		{name: "cancel-after-done-409", fails: []string{"cancel.after-done"},
			body: func(_ *proxy, r *http.Request, status int, h http.Header, b []byte) (int, []byte) {
				var m map[string]any
				if !isOp(r, http.MethodPost, "v1/asks/*/cancel") || json.Unmarshal(b, &m) != nil || m["state"] == "running" || m["state"] == "error" {
					return status, b
				}
				h.Set("Content-Type", "application/problem+json")
				return http.StatusConflict, []byte(`{"type":"about:blank","title":"Conflict","status":409}`)
			}},
		{name: "question-in-step", fails: []string{"privacy.question-only-in-accepted"},
			frame: editEvents("step", func(p *proxy, m map[string]any) {
				args, _ := m["args"].(map[string]any)
				if args == nil {
					args = map[string]any{}
				}
				args["asked"] = p.question(m["ticket"].(string))
				m["args"] = args
			})},
		{name: "two-opens", fails: []string{"run.branch-brackets-steps"},
			frame: editEvents("branch", func(_ *proxy, m map[string]any) { m["state"] = "open" })},
		{name: "extra-branch", fails: []string{"run.branch-per-source"},
			frame: editEvents("branch", func(_ *proxy, m map[string]any) {
				if m["state"] == "open" {
					m["branch_id"], m["role"], m["source"] = "b2", "source", "demo"
				}
			})},
		{name: "steps-name-a-branch", fails: []string{"run.events-name-open-branches"},
			frame: editEvents("step", func(_ *proxy, m map[string]any) { m["branch_id"] = "b1" })},
		{name: "no-branch-close", fails: []string{"cancel.closes-every-branch"},
			frame: func(_ *proxy, _ *streamState, f sseFrame) []sseFrame {
				if m := f.data(); m != nil && m["type"] == "branch" && m["state"] == "close" {
					return nil
				}
				return []sseFrame{f}
			}},
		{name: "divergence-always", fails: []string{"behaviour.divergence"},
			frame: editEvents("answer", func(_ *proxy, m map[string]any) {
				m["divergence"] = map[string]any{"result": m["result"], "sql": m["sql"], "without": []any{"incident"}}
			})},
		{name: "double-done", fails: []string{"run.one-terminal-then-done"},
			frame: func(_ *proxy, _ *streamState, f sseFrame) []sseFrame {
				m := f.data()
				if m == nil || m["type"] != "done" {
					return []sseFrame{f}
				}
				again := map[string]any{}
				for k, v := range m {
					again[k] = v
				}
				again["seq"] = m["seq"].(float64) + 1
				return []sseFrame{f, eventFrame(again)}
			}},
		{name: "milestone-after-step", fails: []string{"run.milestone-before-step"}, frame: milestoneAfterStep()},
		{name: "done-steps-off", fails: []string{"run.done-steps"},
			frame: editEvents("done", func(_ *proxy, m map[string]any) { m["steps"] = m["steps"].(float64) + 1 })},
		{name: "drop-milestone-on-overflow", fails: []string{"overflow.only-steps-evicted"},
			frame: func(_ *proxy, st *streamState, f sseFrame) []sseFrame {
				if m := f.data(); m != nil && m["type"] == "milestone" && st.gap {
					st.gap = false
					return nil
				}
				return []sseFrame{f}
			}},
		{name: "step-ms-inflated", fails: []string{"audit.step-ms"},
			frame: editEvents("step", func(_ *proxy, m map[string]any) { m["ms"] = m["ms"].(float64) + 1000 })},
		{name: "status-stuck-running", fails: []string{"status.agrees-with-stream"},
			body: editJSON(http.MethodGet, "v1/asks/*", http.StatusOK, func(m map[string]any) {
				m["state"] = "running"
				delete(m, "terminal")
				delete(m, "done")
			})},
		{name: "ticket-without-created-at", fails: []string{"schema.bodies"},
			body: editJSON(http.MethodPost, "v1/conversations/*/asks", http.StatusAccepted, func(m map[string]any) { delete(m, "created_at") })},
		{name: "bad-timestamps", fails: []string{"schema.events"},
			frame: editEvents("", func(_ *proxy, m map[string]any) { m["ts"] = "yesterday" })},
		{name: "refusal-as-answer", fails: []string{"behaviour.refusal"},
			frame: editEvents("refusal", func(_ *proxy, m map[string]any) {
				for _, k := range []string{"tool", "source", "call_id", "reason"} {
					delete(m, k)
				}
				m["type"], m["text"], m["caveats"], m["provenance"], m["sql"], m["divergence"] = "answer", "Nothing to report.", []any{}, []any{}, []any{}, nil
				m["path"] = map[string]any{"speed": "fast", "detail": "catalog"}
			})},
		{name: "abstention-echoes-question", fails: []string{"behaviour.abstention"},
			frame: editEvents("abstention", func(p *proxy, m map[string]any) {
				m["terms"] = append(m["terms"].([]any), p.question(m["ticket"].(string)))
			})},
		{name: "always-full", fails: []string{"behaviour.catalog-fast"},
			frame: editEvents("answer", func(_ *proxy, m map[string]any) {
				m["path"] = map[string]any{"speed": "full", "detail": "warehouse"}
			})},
		{name: "no-headline", fails: []string{"behaviour.answer-headline"},
			frame: editEvents("answer", func(_ *proxy, m map[string]any) { delete(m, "headline") })},
		{name: "lenient-input", fails: []string{"ask.bad-input-400"},
			request: func(_ *proxy, r *http.Request) {
				if !isOp(r, http.MethodPost, "v1/conversations/*/asks") {
					return
				}
				body, _ := io.ReadAll(r.Body)
				var m map[string]any
				err := json.Unmarshal(body, &m)
				q, _ := m["question"].(string)
				if err != nil || len(m) != 1 || q == "" || len(q) > 4000 {
					body = []byte(`{"question":"What does change failure rate mean?"}`)
				}
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			}},
		{name: "webhook-ignored", fails: []string{"webhook.disallowed-400", "webhook.delivered-signed", "webhook.retried-same-id", "webhook.redirect-not-followed"},
			request: func(_ *proxy, r *http.Request) {
				if !isOp(r, http.MethodPost, "v1/conversations/*/asks") {
					return
				}
				body, _ := io.ReadAll(r.Body)
				var m map[string]any
				if json.Unmarshal(body, &m) == nil {
					delete(m, "webhook")
					body, _ = json.Marshal(m)
				}
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			}},
		{name: "webhook-dot-segments-resolved", fails: []string{"webhook.disallowed-400"},
			// A service that compares the allow-list with the path its receiver will resolve
			// to, not the one it is given: the proxy resolves the dot segments first.
			request: func(_ *proxy, r *http.Request) {
				if !isOp(r, http.MethodPost, "v1/conversations/*/asks") {
					return
				}
				body, _ := io.ReadAll(r.Body)
				var m map[string]any
				if json.Unmarshal(body, &m) == nil {
					if w, ok := m["webhook"].(map[string]any); ok {
						if s, ok := w["url"].(string); ok {
							if u, err := url.Parse(s); err == nil && strings.Contains(u.Path, "..") {
								u.Path, u.RawPath = path.Clean(u.Path), ""
								w["url"] = u.String()
							}
						}
					}
					body, _ = json.Marshal(m)
				}
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			}},
		{name: "webhook-terminal-rewritten", fails: []string{"webhook.delivered-signed"},
			// A service whose delivery carries the terminal event with the same values but not
			// the bytes the stream carried (here the stream's are re-serialized, keys sorted):
			// a receiver comparing the two, or verifying one signature over both, sees them
			// differ, and the contract says "exactly the JSON the stream carried".
			frame: func(_ *proxy, _ *streamState, f sseFrame) []sseFrame {
				m := f.data()
				switch t, _ := m["type"].(string); t {
				case "answer", "abstention", "refusal", "error":
					return []sseFrame{eventFrame(m)}
				}
				return []sseFrame{f}
			}},
		{name: "webhook-state-hidden", fails: []string{"webhook.delivered-signed", "webhook.retried-same-id", "webhook.redirect-not-followed"},
			body: func(_ *proxy, r *http.Request, status int, _ http.Header, b []byte) (int, []byte) {
				if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/v1/asks/") || strings.HasSuffix(r.URL.Path, "/events") {
					return status, b
				}
				var m map[string]any
				if json.Unmarshal(b, &m) != nil {
					return status, b
				}
				delete(m, "webhook")
				out, _ := json.Marshal(m)
				return status, out
			}},
		{name: "cancel-on-disconnect", fails: []string{"stream.disconnect-keeps-run"},
			disconnected: func(p *proxy, r *http.Request) {
				ticket := strings.Split(r.URL.Path, "/")[4]
				req, err := http.NewRequest(http.MethodPost, p.upstream.String()+"/v1/asks/"+ticket+"/cancel", nil)
				if err != nil {
					return
				}
				req.Header.Set("Authorization", r.Header.Get("Authorization"))
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}},
		{name: "ignore-idempotency-key", fails: []string{"create.idempotency-key"},
			request: func(_ *proxy, r *http.Request) { r.Header.Del("Idempotency-Key") }},
		{name: "prefer-ignored", fails: []string{"status.prefer-wait"},
			request: func(_ *proxy, r *http.Request) { r.Header.Del("Prefer") }},
		{name: "amnesia", fails: []string{"behaviour.follow-up"},
			request: func(p *proxy, r *http.Request) {
				if !isOp(r, http.MethodPost, "v1/conversations/*/asks") {
					return
				}
				conv := p.freshConversation(r)
				if conv != "" {
					r.URL.Path = strings.Replace(r.URL.Path, strings.Split(r.URL.Path, "/")[4], conv, 1)
				}
			}},
	}
}

// freshConversation opens a new conversation upstream as the request's caller: a service that
// forgets every conversation's memory.
func (p *proxy) freshConversation(r *http.Request) string {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, p.upstream.String()+"/v1/conversations", strings.NewReader("{}"))
	if err != nil {
		return ""
	}
	req.Header.Set("Authorization", r.Header.Get("Authorization"))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var c struct {
		ID string `json:"id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&c)
	return c.ID
}

func TestEveryCheckFailsAgainstABrokenVariant(t *testing.T) {
	// One pair of stacks serves every variant: each variant makes its own conversations and
	// runs, and runs one after the other, so no variant sees another's work.
	st := startStack(t)
	// holes3Variants' last, like holeVariants', fills the limits target: both run last.
	h3 := holes3Variants()
	vs := slices.Concat(variants(testSlowWait), mutationVariants(), h3[:len(h3)-1], holes4Variants(), holeVariants(testSlowWait), h3[len(h3)-1:])
	covered := map[string]bool{}
	for _, v := range vs {
		for _, c := range v.fails {
			covered[c] = true
		}
	}
	for _, name := range conformance.Names() {
		if !covered[name] {
			t.Errorf("check %s: no broken variant fails it", name)
		}
	}
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			cfg := st.config(startProxy(t, st, st.main.AskURL, v), startProxy(t, st, st.small.AskURL, v), startProxy(t, st, st.limits.AskURL, v))
			if v.audit != nil {
				cfg.AuditURL = startAuditProxy(t, st.main.SourceURL, v.audit)
			}
			if v.webhook != nil {
				st.relay.set(v.webhook)
				t.Cleanup(func() { st.relay.set(nil) })
			}
			runVariant(t, cfg, v)
		})
	}
}

// runVariant runs v's checks, and only those, with cfg (whose targets are proxies through v),
// and fails t unless every one of them fails.
func runVariant(t *testing.T, cfg conformance.Config, v variant) {
	t.Helper()
	quoted := make([]string, len(v.fails))
	for i, c := range v.fails {
		quoted[i] = regexp.QuoteMeta(c)
	}
	cfg.Only = regexp.MustCompile(`^(` + strings.Join(quoted, "|") + `)$`)
	rep, err := conformance.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range rep.Results {
		t.Logf("%s %s — %s", res.Status, res.Name, res.Detail)
	}
	for _, c := range v.fails {
		res, ok := rep.Result(c)
		if !ok || res.Status != conformance.Fail {
			t.Errorf("%s against %s: %s %s, want FAIL", c, v.name, res.Status, res.Detail)
		}
	}
	if got := len(rep.Results); got != len(v.fails) {
		t.Errorf("ran %d checks, want %d", got, len(v.fails))
	}
}

// milestoneAfterStep reports each tool call's milestone after its step, as the agent once did:
// a milestone directly followed by a step trade places (the seqs stay in order).
func milestoneAfterStep() func(*proxy, *streamState, sseFrame) []sseFrame {
	var mu sync.Mutex
	held := map[*streamState]map[string]any{}
	return func(_ *proxy, st *streamState, f sseFrame) []sseFrame {
		mu.Lock()
		defer mu.Unlock()
		m := f.data()
		prev, holding := held[st]
		switch {
		case m != nil && m["type"] == "milestone" && !holding:
			held[st] = m
			return nil
		case !holding:
			return []sseFrame{f}
		}
		delete(held, st)
		if m == nil || m["type"] != "step" {
			return []sseFrame{eventFrame(prev), f}
		}
		// The step goes first, at the milestone's seq; the milestone follows at the step's.
		prev["seq"], m["seq"] = m["seq"], prev["seq"]
		return []sseFrame{eventFrame(m), eventFrame(prev)}
	}
}
