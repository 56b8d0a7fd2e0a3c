package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Limits are the settings of the limits target (Config.LimitsURL): the same implementation
// started with small caps and a short deadline and TTL, so that what the contract promises at
// those edges can be seen in seconds. A zero field means the target's value is not known, and
// the check that needs it is skipped.
type Limits struct {
	// MaxBodyBytes is DAS_ASK_MAX_BODY_BYTES: a larger body is 413.
	MaxBodyBytes int64
	// MaxInFlight is DAS_ASK_MAX_INFLIGHT_PER_ID: one more running ask is 429 + Retry-After.
	MaxInFlight int
	// MaxTickets is DAS_ASK_MAX_TICKETS: one more conversation than it is 503 + Retry-After.
	MaxTickets int
	// Deadline is DAS_ASK_DEADLINE_S: shorter than the slow question's silence (SlowWait), so
	// the slow run ends in error{timeout} then done.
	Deadline time.Duration
	// TTL is DAS_ASK_TTL_S: a finished ticket replays until it and is 404 after it.
	TTL time.Duration
}

// DevLimits are the settings of the limits targets this repository starts — the dev stack's
// (cmd/conformance --dev-stack) and the replicas' (cmd/ask-cluster's limits group): caps small
// enough to reach in a few asks, a deadline shorter than the slow question's 3 s silence and a
// TTL of a few seconds, so that the deadline and TTL checks cost seconds.
func DevLimits() Limits {
	return Limits{MaxBodyBytes: 1024, MaxInFlight: 1, MaxTickets: 6, Deadline: time.Second, TTL: 3 * time.Second}
}

// limitsFixtures are the fixtures made against the limits target.
type limitsFixtures struct {
	target   memo[*session]
	deadline memo[*deadlineRun]
	ttl      memo[*ttlRun]
}

// limitsTarget is the limits session for a check that needs one of the limits target's
// settings (variable, given by flag), known when known is true. When there is no limits
// target, it could not be reached, or the setting is not known, stop is the verdict the check
// returns instead.
func (s *session) limitsTarget(ctx context.Context, known bool, variable, flag string) (l *session, stop *verdict) {
	l, err := s.limitsSession(ctx)
	var v verdict
	switch {
	case err != nil:
		v = broken(err)
	case l == nil:
		v = skip(noLimits)
	case !known:
		v = skip("the limits target's %s is not known (%s)", variable, flag)
	default:
		return l, nil
	}
	return nil, &v
}

// limitsSession is a session against LimitsURL; nil when there is none.
func (s *session) limitsSession(ctx context.Context) (*session, error) {
	return s.lim.target.get(ctx, func(context.Context) (*session, error) {
		if s.cfg.LimitsURL == "" {
			return nil, nil
		}
		cfg := s.cfg
		cfg.BaseURL, cfg.Tokens = cfg.LimitsURL, cfg.LimitsTokens
		o, err := newSession(cfg)
		if err != nil {
			return nil, err
		}
		// One contract: the limits target is the same implementation, so it is judged by the
		// document the main target publishes.
		if c, err := s.schema(ctx); err == nil {
			_, _ = o.contract.get(ctx, func(context.Context) (*contract, error) { return c, nil })
		}
		return o, nil
	})
}

// noLimits is the reason a limits check is skipped without a limits target.
const noLimits = "no limits target (--limits-url, the same implementation with small limits, a short deadline and TTL; --dev-stack starts one)"

// rawCall is one request the suite makes by hand (a body the generated client cannot send, or
// a header it does not expose), with its response read in full.
type rawCall struct {
	status int
	header http.Header
	body   []byte
}

// nobody is the caller of a request made without a bearer.
const nobody Identity = -1

// do makes a request against the session's base URL as who (no bearer for nobody).
func (s *session) do(ctx context.Context, who Identity, method, path string, body []byte, header http.Header) (rawCall, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.cfg.BaseURL+path, rd)
	if err != nil {
		return rawCall{}, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if who != nobody {
		tok, err := s.token(ctx, who)
		if err != nil {
			return rawCall{}, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	// Through the recorder, like the generated client's calls: what comes back is examined by
	// the checks of every response (schema, privacy, problem status) too.
	resp, err := doer{hc: s.cfg.HTTPClient, rec: s.rec}.Do(req)
	if err != nil {
		return rawCall{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return rawCall{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return rawCall{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// refusedWith describes what is wrong with a refusal that should be status problem+json, valid
// against the contract, with a Retry-After of whole seconds, at least 1 (a 0 sends a client back
// at once into the same refusal), when retryAfter is set; "" when nothing is.
func (s *session) refusedWith(ctx context.Context, c rawCall, method, path string, status int, retryAfter bool) string {
	var found []string
	if c.status != status {
		return fmt.Sprintf("%d %s", c.status, mediaType(c.header))
	}
	if mt := mediaType(c.header); mt != "application/problem+json" {
		found = append(found, fmt.Sprintf("Content-Type %q", mt))
	}
	// RFC 9457 §3.1.2, as schema.problem-status holds the main target's: the limits target's
	// refusals are made in a session of their own, which that check does not see.
	var p struct {
		Status *float64 `json:"status"`
	}
	if json.Unmarshal(c.body, &p) == nil && p.Status != nil && *p.Status != float64(c.status) {
		found = append(found, fmt.Sprintf("the problem's status member %v", *p.Status))
	}
	if retryAfter {
		if n, err := strconv.Atoi(strings.TrimSpace(c.header.Get("Retry-After"))); err != nil || n < 1 {
			found = append(found, fmt.Sprintf("Retry-After %q, want whole seconds, at least 1", c.header.Get("Retry-After")))
		}
	}
	// Nor a question or a bearer: the limits target's answers are not recorded for the
	// privacy checks (a session of their own), so each refusal is looked at here.
	found = append(found, s.leaks(ctx, c)...)
	if ct, err := s.schema(ctx); err == nil {
		x := exchange{Method: method, Path: path, Status: c.status, Header: c.header, Body: c.body}
		if err := ct.validateExchange(ctx, x); err != nil {
			found = append(found, err.Error())
		}
	}
	return strings.Join(found, "; ")
}

// padded is a JSON object padded with whitespace to n bytes: valid, small in content, large
// on the wire, so that its size is the only thing wrong with it.
func padded(obj string, n int64) []byte {
	pad := max(0, n-int64(len(obj)))
	return []byte(obj[:len(obj)-1] + strings.Repeat(" ", int(pad)) + "}")
}

// deadlineRun is A asking the slow question at the limits target, whose deadline is shorter
// than the question's silence; while it runs, one ask too many is tried.
type deadlineRun struct {
	run *run
	// over is an ask in another conversation while MaxInFlight asks run (here: this one).
	over    rawCall
	overErr error
}

func (s *session) deadlineFixture(ctx context.Context, l *session) (*deadlineRun, error) {
	return s.lim.deadline.get(ctx, func(ctx context.Context) (*deadlineRun, error) {
		r, _, _, done, err := l.askSlow(ctx, "slow at the limits target", nil)
		if err != nil {
			return nil, err
		}
		d := &deadlineRun{run: r}
		// MaxInFlight asks in all: this one and MaxInFlight−1 more, then one too many.
		var extra []*run
		for i := 1; i < s.cfg.Limits.MaxInFlight && d.overErr == nil; i++ {
			var x *run
			x, _, _, _, d.overErr = l.askSlow(ctx, "slow at the limits target, "+strconv.Itoa(i+1), nil)
			extra = append(extra, x)
		}
		if d.overErr == nil && s.cfg.Limits.MaxInFlight > 0 {
			conv, err := l.conversation(ctx, A)
			if err != nil {
				d.overErr = err
			} else {
				path := "/v1/conversations/" + conv + "/asks"
				d.over, d.overErr = l.do(ctx, A, http.MethodPost, path, []byte(`{"question":`+strconv.Quote(s.cfg.Questions.Answer)+`}`), nil)
			}
		}
		<-done
		l.settle(ctx, r)
		for _, x := range extra {
			if x != nil {
				// Each ends at the deadline too; wait for it so the next fixture finds the
				// identity's in-flight slots free.
				_ = l.stream(ctx, A, x.ticket.Ticket, cursor{}, nil)
			}
		}
		return d, nil
	})
}

// ttlRun is a finished run at the limits target looked at during and after its TTL.
type ttlRun struct {
	run *run
	// doneAt is when its done arrived.
	doneAt time.Time
	// during is the replay and status at half the TTL; after, past the TTL.
	during, after             *capture
	duringStatus, afterStatus rawCall
	duringAt, afterAt         time.Duration
}

func (s *session) ttlFixture(ctx context.Context, l *session) (*ttlRun, error) {
	return s.lim.ttl.get(ctx, func(ctx context.Context) (*ttlRun, error) {
		r, err := l.fullRun(ctx, "answer at the limits target", A, "", s.cfg.Questions.Answer)
		if err != nil {
			return nil, err
		}
		d, ok := r.live.done()
		if !ok {
			return nil, fmt.Errorf("the run at the limits target did not reach done: %s", typesOf(r.live.Events))
		}
		t := &ttlRun{run: r, doneAt: d.At}
		ttl := s.cfg.Limits.TTL
		look := func(at time.Duration) (*capture, rawCall, error) {
			if err := sleepUntil(ctx, t.doneAt.Add(at)); err != nil {
				return nil, rawCall{}, err
			}
			c := l.stream(ctx, A, r.ticket.Ticket, cursor{}, nil)
			st, err := l.do(ctx, A, http.MethodGet, "/v1/asks/"+r.ticket.Ticket, nil, nil)
			return c, st, err
		}
		t.duringAt, t.afterAt = ttl/2, ttl+ttlSlack(ttl)
		if t.during, t.duringStatus, err = look(t.duringAt); err != nil {
			return nil, err
		}
		if t.after, t.afterStatus, err = look(t.afterAt); err != nil {
			return nil, err
		}
		return t, nil
	})
}

// ttlSlack is how long past the TTL a ticket may still be served: eviction is the store's
// (timers, key expiry), not instantaneous.
func ttlSlack(ttl time.Duration) time.Duration { return max(time.Second, ttl/4) }

// deadlineSlack is how long past the deadline the timeout may arrive.
func deadlineSlack(d time.Duration) time.Duration { return max(time.Second, d/4) }

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// jsonField is a string field of a JSON object body, or "".
func jsonField(body []byte, key string) string {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	s, _ := m[key].(string)
	return s
}

// leaks says whether a response carries one of the suite's questions (whole, or a run of
// minShared characters, as written or percent-encoded) or either identity's bearer, in its body
// or a header value.
func (s *session) leaks(ctx context.Context, c rawCall) []string {
	texts := []string{string(c.body)}
	for _, vs := range c.header {
		texts = append(texts, vs...)
	}
	q := s.cfg.Questions
	var marks []string
	for _, who := range []Identity{A, B} {
		if tok, err := s.token(ctx, who); err == nil {
			marks = append(marks, bearerMarks(tok)...)
		}
	}
	carries := carrier(marks)
	var found []string
	for _, t := range texts {
		d := decoded(t)
		for _, question := range []string{q.Answer, q.Slow, q.Refusal, q.Abstention, q.CatalogOnly, q.WrongWinner, q.FollowUpFirst, q.FollowUpSecond} {
			if n, part := carriesPart(question, d); part || strings.Contains(strings.ToLower(d), strings.ToLower(question)) {
				found = append(found, fmt.Sprintf("carries %d characters of a question", n))
				break
			}
		}
		if carries(t) {
			found = append(found, "carries a bearer")
		}
	}
	return found
}
