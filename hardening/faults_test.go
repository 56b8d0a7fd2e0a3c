package hardening_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask/agent"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/internal/loopback"
)

// faultDeadline is the whole-request deadline of the fault tests: short, so a hang shows.
const faultDeadline = 4 * time.Second

// runFault asks q as alice and returns the terminal event of a log that keeps every promise,
// after checking that done came within the deadline (plus scheduling slack), and that neither
// the question nor the token shows up in the error.
func runFault(t *testing.T, s *stack.Stack, q string) envelope {
	t.Helper()
	a := newAPI(s.AskURL)
	defer a.close()
	ctx := t.Context()
	tok := mint(t, s.IdP, idp.Claims{OID: "alice"})
	cid := a.conversation(ctx, t, tok)
	start := time.Now()
	ticket := a.ask(ctx, t, tok, cid, q)
	frames := a.events(ctx, t, tok, ticket, "")
	if took := time.Since(start); took > faultDeadline+3*time.Second {
		t.Errorf("the log ended after %s; the deadline is %s", took, faultDeadline)
	}
	term := checkLog(t, frames, 1, false)
	if term.Type == "error" && (strings.Contains(term.Message, tok) || strings.Contains(term.Message, q)) {
		t.Errorf("error message %q carries the token or the question", term.Message)
	}
	// A reconnect after the end replays the same log.
	if again := a.events(ctx, t, tok, ticket, ""); len(again) != len(frames) {
		t.Errorf("replay after the end: %d events, first read %d", len(again), len(frames))
	}
	return term
}

// sourceBehind starts the stack with its agent reaching the demo source through a fault proxy.
func sourceBehind(t *testing.T, f fault) (*stack.Stack, *faultProxy) {
	t.Helper()
	p := newFaultProxy(t)
	p.set(f)
	s, _ := startStack(t, stack.Options{Deadline: faultDeadline, Sources: []agent.SourceConfig{{Name: "demo", URL: p.srv.URL + "/mcp"}}})
	t.Cleanup(p.releaseAll) // runs before the stack closes
	p.setTarget(t, s.SourceURL)
	return s, p
}

// Source faults: down, answering 5xx, hanging up mid-call, too slow for the deadline. Each run
// ends with one terminal event and done, within the deadline, with the kind that names it.
func TestSourceFaults(t *testing.T) {
	t.Run("down", func(t *testing.T) {
		dead := "http://" + loopback.Refused(t) + "/mcp" // nothing listens there: connection refused
		s, _ := startStack(t, stack.Options{Deadline: faultDeadline, Sources: []agent.SourceConfig{{Name: "demo", URL: dead}}})
		if term := runFault(t, s, qSev1); term.Type != "error" || term.Kind != "transport" {
			t.Errorf("source down: %s/%s, want error/transport", term.Type, term.Kind)
		}
		if n := stubCalls(s); n != 0 {
			t.Errorf("%d model calls with the source down", n)
		}
	})
	t.Run("5xx on every request", func(t *testing.T) {
		s, _ := sourceBehind(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) bool {
			http.Error(w, "upstream broke", http.StatusInternalServerError)
			return true
		})
		if term := runFault(t, s, qSev1); term.Type != "error" || term.Kind != "transport" {
			t.Errorf("source 5xx: %s/%s, want error/transport", term.Type, term.Kind)
		}
	})
	t.Run("5xx on tool calls", func(t *testing.T) {
		s, _ := sourceBehind(t, func(w http.ResponseWriter, _ *http.Request, body []byte) bool {
			if isToolCall(body) {
				http.Error(w, "upstream broke", http.StatusBadGateway)
				return true
			}
			return false
		})
		if term := runFault(t, s, qSev1); term.Type != "error" || term.Kind != "transport" {
			t.Errorf("source 5xx on calls: %s/%s, want error/transport", term.Type, term.Kind)
		}
	})
	t.Run("hangs up mid-call", func(t *testing.T) {
		var calls atomic.Int64
		s, _ := sourceBehind(t, func(w http.ResponseWriter, _ *http.Request, body []byte) bool {
			if isToolCall(body) && calls.Add(1) == 2 {
				hangUp(w)
				return true
			}
			return false
		})
		if term := runFault(t, s, qSev1); term.Type != "error" || term.Kind != "transport" {
			t.Errorf("source hang-up: %s/%s, want error/transport", term.Type, term.Kind)
		}
	})
	t.Run("slower than the deadline", func(t *testing.T) {
		var p *faultProxy
		s, p := sourceBehind(t, func(_ http.ResponseWriter, r *http.Request, body []byte) bool {
			if isToolCall(body) {
				p.hold(r)
				return false
			}
			return false
		})
		if term := runFault(t, s, qSev1); term.Type != "error" || term.Kind != "timeout" {
			t.Errorf("slow source: %s/%s, want error/timeout", term.Type, term.Kind)
		}
	})
}

// The caller's token expires between two tool calls: the source refuses the next call with a
// 401 and the run ends in error{transport}, with no special rule. The proxy stands in for the
// clock: after the first call it forwards a token of the same identity that has expired, which
// the source validates for real.
func TestTokenExpiringMidRun(t *testing.T) {
	var expired atomic.Pointer[string]
	var calls atomic.Int64
	s, _ := sourceBehind(t, func(_ http.ResponseWriter, r *http.Request, body []byte) bool {
		if isToolCall(body) && calls.Add(1) > 1 {
			r.Header.Set("Authorization", "Bearer "+*expired.Load())
		}
		return false
	})
	tok := mint(t, s.IdP, idp.Claims{OID: "alice", Expired: true})
	expired.Store(&tok)
	term := runFault(t, s, qSev1)
	if term.Type != "error" || term.Kind != "transport" {
		t.Fatalf("token expired mid-run: %s/%s, want error/transport", term.Type, term.Kind)
	}
	if calls.Load() != 2 {
		t.Errorf("%d tool calls, want 2: the run must stop at the refused one", calls.Load())
	}
}

// modelBehind starts the stack with a real OpenAI-compatible adapter pointed, through a fault
// proxy, at an llm-stub of our own.
func modelBehind(t *testing.T, f fault) *stack.Stack {
	t.Helper()
	return modelBehindRetrying(t, faultDeadline, 1, f)
}

// modelBehindRetrying is modelBehind with the whole-request deadline and the adapter's retries
// given (0: its default, two).
func modelBehindRetrying(t *testing.T, deadline time.Duration, retries int, f fault) *stack.Stack {
	t.Helper()
	stub, err := llmstub.New(llmstub.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(stub.Handler())
	t.Cleanup(hs.Close)
	p := newFaultProxy(t)
	p.setTarget(t, hs.URL)
	p.set(f)
	s, _ := startStack(t, stack.Options{Deadline: deadline, AdminAddr: "127.0.0.1:0", Model: &agent.Config{
		LLM: agent.LLMOpenAI, BaseURL: p.srv.URL + "/v1", APIKey: "k", Model: "stub",
		Timeout: time.Second, MaxRetries: retries, MaxTokens: 1024, MaxModelCalls: 12,
	}})
	t.Cleanup(p.releaseAll)
	return s
}

// Model faults: 429 and 5xx (retried, then given up), garbage, a hang longer than the per-call
// timeout, and one that answers after the deadline. Each ends with one terminal and done,
// within the deadline, as error{model} — or error{timeout} when the deadline came first.
func TestModelFaults(t *testing.T) {
	onChat := func(f func(w http.ResponseWriter, r *http.Request)) fault {
		return func(w http.ResponseWriter, r *http.Request, _ []byte) bool {
			if strings.HasSuffix(r.URL.Path, "/chat/completions") {
				f(w, r)
				return true
			}
			return false
		}
	}
	for _, c := range []struct {
		name string
		f    fault
		kind string
	}{
		{"429", onChat(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "0")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"error":{"message":"rate limited","type":"rate_limit_error"}}`))
		}), "model"},
		{"503", onChat(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"message":"overloaded","type":"server_error"}}`))
		}), "model"},
		{"garbage", onChat(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"choices":[{"message":`))
		}), "model"},
		{"not JSON at all", onChat(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte(`<html>gateway</html>`))
		}), "model"},
		{"hangs up", onChat(func(w http.ResponseWriter, _ *http.Request) { hangUp(w) }), "model"},
		{"slower than each call's timeout", onChat(func(_ http.ResponseWriter, r *http.Request) {
			<-r.Context().Done() // the adapter gives up after its 1 s timeout
		}), "model"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := modelBehind(t, c.f)
			if term := runFault(t, s, qSev1); term.Type != "error" || term.Kind != c.kind {
				t.Errorf("%s: %s/%s (%s), want error/%s", c.name, term.Type, term.Kind, term.Message, c.kind)
			}
		})
	}
}

// A model that hangs beyond the whole deadline (its per-call timeout is longer than the
// deadline) ends in error{timeout} at the deadline, not when the model gives up.
func TestModelSlowerThanTheDeadline(t *testing.T) {
	stub, err := llmstub.New(llmstub.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(stub.Handler())
	t.Cleanup(hs.Close)
	p := newFaultProxy(t)
	p.setTarget(t, hs.URL)
	p.set(func(_ http.ResponseWriter, r *http.Request, _ []byte) bool {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			p.hold(r)
			return true
		}
		return false
	})
	s, _ := startStack(t, stack.Options{Deadline: faultDeadline, Model: &agent.Config{
		LLM: agent.LLMOpenAI, BaseURL: p.srv.URL + "/v1", APIKey: "k", Model: "stub",
		Timeout: time.Minute, MaxRetries: -1, MaxTokens: 1024, MaxModelCalls: 12,
	}})
	t.Cleanup(p.releaseAll)
	if term := runFault(t, s, qSev1); term.Type != "error" || term.Kind != "timeout" {
		t.Errorf("model slower than the deadline: %s/%s, want error/timeout", term.Type, term.Kind)
	}
}
