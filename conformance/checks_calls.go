package conformance

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The other direction of audit.step-ms: every tool call a source audited for a run must be a
// step of that run, unless the count lets it have been evicted, or it was still in flight when
// the run ended. A run's calls are the audit lines of its identity that started after its
// accepted event and ended before its done (both stamped by the service), whose call_id is no
// step of any other run the suite made.

// oidOf reads the oid claim of a JWT without verifying it: the suite only needs to know whose
// audit lines to read.
func oidOf(token string) (string, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", errors.New("the bearer is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", errors.New("the bearer's payload is not base64url")
	}
	var claims struct {
		OID string `json:"oid"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.OID == "" {
		return "", errors.New("the bearer has no oid claim")
	}
	return claims.OID, nil
}

// auditOf returns every audit line of one identity at the first source's audit root:
// GET {AuditURL}/audit?oid=..., filtered here as well in case the source ignores the filter.
func (s *session) auditOf(ctx context.Context, oid string) ([]auditLine, error) {
	return s.auditWhere(ctx, []string{s.cfg.AuditURL}, "oid", oid, func(l auditLine) bool { return l.OID == oid })
}

// eventTime is an event's ts, stamped by the service.
func eventTime(e event) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, e.str("ts"))
	return t, err == nil
}

// inFlightAfter is when a run's calls may have been in flight at its end: cancel, deadline,
// shutdown and a lost replica end the log at once, and a call already made completes without a
// step. A call that ended after the last event the log took before its end may be one of them.
// For any other end it is the zero time: every call's step was emitted.
func inFlightAfter(c *capture) (time.Time, bool) {
	t, ok := c.terminal()
	if !ok || t.Type != "error" {
		return time.Time{}, false
	}
	switch t.str("kind") {
	case "cancelled", "timeout", "shutdown", "interrupted":
	default:
		return time.Time{}, false
	}
	var last time.Time
	for _, e := range c.Events {
		if e.Seq >= t.Seq-1 { // the branch close, the terminal event and done: the end itself
			break
		}
		if ts, ok := eventTime(e); ok {
			last = ts
		}
	}
	return last, true
}

func checkCallsStreamed(ctx context.Context, s *session) verdict {
	if s.cfg.AuditURL == "" {
		return skip("no audit log to compare with (--audit)")
	}
	runs, err := s.allRuns(ctx)
	if err != nil {
		return broken(err)
	}
	known := map[string]bool{}
	for _, r := range runs {
		for _, st := range allSteps(r) {
			known[st.str("call_id")] = true
		}
	}
	lines := map[Identity][]auditLine{}
	for _, who := range []Identity{A, B} {
		tok, err := s.token(ctx, who)
		if err != nil {
			return broken(err)
		}
		oid, err := oidOf(tok)
		if err != nil {
			return skip("cannot tell identity %s's audit lines apart: %v", who, err)
		}
		if lines[who], err = s.auditOf(ctx, oid); err != nil {
			return broken(err)
		}
	}
	var found []string
	calls, judged := 0, 0
	for _, r := range runs {
		c := r.final
		if c == nil || streamOK(c) != "" || len(c.Events) == 0 {
			continue
		}
		from, okFrom := eventTime(c.Events[0])
		d, okDone := c.done()
		to, okTo := eventTime(d)
		if c.Events[0].Type != "accepted" || !okFrom || !okDone || !okTo {
			continue // the stream checks report it
		}
		judged++
		steps := map[string]bool{}
		for _, st := range allSteps(r) {
			steps[st.str("call_id")] = true
		}
		cut, cutOK := inFlightAfter(c)
		var unstreamed []string
		for _, l := range lines[r.who] {
			start := l.TS.Add(-time.Duration(l.Ms) * time.Millisecond)
			if start.Before(from) || l.TS.After(to) {
				continue
			}
			if known[l.CallID] && !steps[l.CallID] {
				continue // another run's step
			}
			if !steps[l.CallID] && cutOK && l.TS.After(cut) {
				continue // in flight when the run was ended
			}
			calls++
			if !steps[l.CallID] {
				unstreamed = append(unstreamed, l.Tool)
			}
		}
		if len(unstreamed) == 0 {
			continue
		}
		// Steps neither stream carried: as many as the count lets the log have evicted and a
		// live reader have missed.
		allowed := evictable(d.Seq, r.bound)
		if int64(len(unstreamed)) > allowed {
			found = append(found, fmt.Sprintf("%s: %d audited calls (%s) with no step on any stream of the run, in a run of %d events where a bound of %d lets %d be evicted",
				r.label, len(unstreamed), strings.Join(unstreamed, ","), d.Seq, r.bound, allowed))
		}
	}
	if judged == 0 {
		return skip("no run ended with an accepted and a done event to bound its audit lines")
	}
	if calls == 0 {
		return skip("the audit log holds no call made during the %d runs", judged)
	}
	return problems("every tool call audited during a run to be a step of it (unless the bound let it be evicted)", found,
		fmt.Sprintf("%d audited calls during %d runs: each a step on the run's stream", calls, judged))
}
