package conformance_test

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/das-ask/ask/conformance"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// The test stacks' timings: the llm-stub's slow question waits testSlowWait instead of 3 s, and
// keep-alives come several times during that wait.
const (
	testKeepAlive = 200 * time.Millisecond
	testSlowWait  = 1200 * time.Millisecond
)

// testStack is two development stacks (demo/stack: the real service, agent, demo source, dev
// IdP and llm-stub) on loopback: one with the default buffer, one whose buffer (8 events) is
// smaller than a run, for the overflow check.
type testStack struct {
	main, small *stack.Stack
	hooks       *conformance.WebhookReceiver
	hookSecret  string
}

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
	st := &testStack{hookSecret: webhooktest.Secret()}
	if st.hooks, err = conformance.NewWebhookReceiver(l, "", st.hookSecret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.hooks.Close)
	start := func(maxEvents int) *stack.Stack {
		script, err := llmstub.ParseScript(yaml)
		if err != nil {
			t.Fatal(err)
		}
		s, err := stack.Start(t.Context(), stack.Options{KeepAlive: testKeepAlive, MaxEvents: maxEvents, StubScript: script,
			WebhookAllow: []string{st.hooks.URL() + "/ask-conformance/"}, WebhookSecret: st.hookSecret})
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
	st.main, st.small = start(0), start(8)
	return st
}

// config is the suite's configuration for targets at base and overflow (the stacks' own URLs,
// or proxies in front of them).
func (st *testStack) config(base, overflow string) conformance.Config {
	return conformance.Config{
		BaseURL:        base,
		OverflowURL:    overflow,
		Tokens:         conformance.IdPTokens{URL: st.main.IdPURL},
		OverflowTokens: conformance.IdPTokens{URL: st.small.IdPURL},
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
	if target == st.small.AskURL {
		return st.small.IdP
	}
	return st.main.IdP
}
