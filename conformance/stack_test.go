package conformance_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask/conformance"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// The test stacks' timings: the llm-stub's slow question waits testSlowWait instead of 3 s, and
// keep-alives come several times during that wait.
const (
	testKeepAlive = 200 * time.Millisecond
	testSlowWait  = 1200 * time.Millisecond
)

// testStack is three development stacks (demo/stack: the real service, agent, demo source, dev
// IdP and llm-stub) on loopback: one with the default buffer, one whose buffer (8 events) is
// smaller than a run, for the overflow check, and one with small limits (testLimits) for the
// limits, deadline and TTL checks.
type testStack struct {
	main, small, limits *stack.Stack
	hooks               *conformance.WebhookReceiver
	hookSecret          string
	// relay stands between the service and hooks: the address hooks gives the service.
	relay *hookRelay
}

// hookRelay passes webhook deliveries on to target as they came, after edit (when set): what a
// broken service would have sent. Redirects are passed back, not followed.
type hookRelay struct {
	target string
	mu     sync.Mutex
	edit   func(r *http.Request)
}

// set makes edit change every delivery from now on (nil: none).
func (h *hookRelay) set(edit func(r *http.Request)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.edit = edit
}

func (h *hookRelay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, h.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	h.mu.Lock()
	edit := h.edit
	h.mu.Unlock()
	if edit != nil {
		edit(out)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// testLimits are the limits stack's settings: the deadline ends the slow question's silence.
var testLimits = conformance.Limits{MaxBodyBytes: 1024, MaxInFlight: 1, MaxTickets: 6, Deadline: testSlowWait * 3 / 4, TTL: 1500 * time.Millisecond}

func startStack(t *testing.T) *testStack {
	t.Helper()
	yaml := bytes.Replace(llmstub.DefaultScriptYAML(), []byte("delay: 3s"), []byte("delay: "+testSlowWait.String()), 1)
	if bytes.Equal(yaml, llmstub.DefaultScriptYAML()) {
		t.Fatal("the llm-stub's default script has no 3s delay to shorten")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st := &testStack{hookSecret: webhooktest.Secret(), relay: &hookRelay{target: "http://" + l.Addr().String()}}
	// The service reaches the receiver through the relay, which passes deliveries on as they
	// came unless a variant edits them.
	relay := httptest.NewServer(st.relay)
	t.Cleanup(relay.Close)
	if st.hooks, err = conformance.NewWebhookReceiver(l, relay.URL, st.hookSecret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.hooks.Close)
	start := func(opts stack.Options) *stack.Stack {
		script, err := llmstub.ParseScript(yaml)
		if err != nil {
			t.Fatal(err)
		}
		opts.KeepAlive, opts.StubScript = testKeepAlive, script
		opts.WebhookAllow, opts.WebhookSecret = []string{st.hooks.URL() + "/ask-conformance/"}, st.hookSecret
		s, err := stack.Start(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("close the stack: %v", err)
			}
		})
		return s
	}
	svc := server.DefaultConfig()
	svc.MaxBodyBytes, svc.MaxInFlight, svc.MaxTickets = testLimits.MaxBodyBytes, testLimits.MaxInFlight, testLimits.MaxTickets
	st.main = start(stack.Options{})
	st.small = start(stack.Options{MaxEvents: 8})
	st.limits = start(stack.Options{Service: &svc, Deadline: testLimits.Deadline, TTL: testLimits.TTL})
	return st
}

// config is the suite's configuration for targets at base and overflow (the stacks' own URLs,
// or proxies in front of them).
func (st *testStack) config(base, overflow, limits string) conformance.Config {
	return conformance.Config{
		BaseURL:        base,
		OverflowURL:    overflow,
		Tokens:         conformance.IdPTokens{URL: st.main.IdPURL},
		OverflowTokens: conformance.IdPTokens{URL: st.small.IdPURL},
		LimitsURL:      limits,
		LimitsTokens:   conformance.IdPTokens{URL: st.limits.IdPURL},
		Limits:         testLimits,
		AuditURL:       st.main.SourceURL,
		Behaviour:      true,
		KeepAlive:      testKeepAlive,
		SlowWait:       testSlowWait,
		RunTimeout:     20 * time.Second,
		Webhooks:       conformance.WebhookConfig{Receiver: st.hooks, Secrets: []string{st.hookSecret}},
	}
}

// idpFor returns the IdP of the stack whose service is at target.
func (st *testStack) idpFor(target string) *idp.IdP {
	for _, s := range []*stack.Stack{st.small, st.limits} {
		if s != nil && s.AskURL == target {
			return s.IdP
		}
	}
	return st.main.IdP
}
