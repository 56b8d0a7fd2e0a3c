package main

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// loseAskReply passes every request to the real service, but loses the reply to the first
// createAsk (the service made the ticket; the connection reset on the way back) and answers each
// later createAsk 503 with a Retry-After longer than the client waits, as a store outage that
// began just then would.
type loseAskReply struct {
	asks atomic.Int32
}

func (l *loseAskReply) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/asks") {
		return http.DefaultTransport.RoundTrip(req)
	}
	if l.asks.Add(1) > 1 {
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Request: req,
			Header: http.Header{"Content-Type": {"application/problem+json"}, "Retry-After": {"120"}},
			Body:   io.NopCloser(strings.NewReader(`{"type":"about:blank","title":"Service Unavailable","status":503}`))}, nil
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return nil, syscall.ECONNRESET
}

// An ask whose first attempt was made but whose reply was lost, and whose retry was then
// refused, may be running: ask says so and names the conversation, remembered for --continue,
// where a second ask is refused with the running ticket. It said "the service refused the
// request: 503 Service Unavailable" alone while the first attempt's ticket ran, and asking again
// asked twice.
func TestAskWhoseReplyWasLostMayHaveBeenMade(t *testing.T) {
	f := start(t)
	env := f.env(t)
	var stdout, stderr bytes.Buffer
	code := runWith(t.Context(), []string{"slow"}, nil, &stdout, &stderr, env, &http.Client{Transport: &loseAskReply{}})
	if code != exitFailure || !strings.Contains(stderr.String(), "503 Service Unavailable") || !strings.Contains(stderr.String(), "may have been made") {
		t.Fatalf("exit %d, stderr %q; want 1, the 503 and that the ask may have been made", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "slow") {
		t.Errorf("the question is in the error: %q", stderr.String())
	}
	conv := regexp.MustCompile(`conversation (c_[A-Za-z0-9_-]+)`).FindStringSubmatch(stderr.String())
	if conv == nil {
		t.Fatalf("no conversation named: %q", stderr.String())
	}
	if last, err := stateFileOf(t, env).last(stateKey(f.url, "alice")); err != nil || last != conv[1] {
		t.Fatalf("remembered %q (%v), want %s for --continue", last, err, conv[1])
	}
	// The lost ask is running (slow): --continue in that conversation names its ticket.
	code, _, errOut := f.run(t.Context(), env, "--continue", "answer")
	if code != exitFailure || !strings.Contains(errOut, "an ask is already running in this conversation (ticket t_") {
		t.Fatalf("--continue: exit %d, stderr %q; want the running ticket named", code, errOut)
	}
	tk := regexp.MustCompile(`ticket (t_[A-Za-z0-9_-]+)`).FindStringSubmatch(errOut)
	if code, _, errOut := f.run(t.Context(), env, "--cancel", tk[1]); code != exitError {
		t.Errorf("--cancel %s: exit %d, stderr %q; want the lost ask cancelled", tk[1], code, errOut)
	}
}
