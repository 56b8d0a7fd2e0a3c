package conformance_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/das-ask/ask/conformance"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/server"
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
}

// testLimits are the limits stack's settings: the deadline ends the slow question's silence.
var testLimits = conformance.Limits{MaxBodyBytes: 1024, MaxInFlight: 1, MaxTickets: 6, Deadline: testSlowWait * 3 / 4, TTL: 1500 * time.Millisecond}

func startStack(t *testing.T) *testStack {
	t.Helper()
	yaml := bytes.Replace(llmstub.DefaultScriptYAML(), []byte("delay: 3s"), []byte("delay: "+testSlowWait.String()), 1)
	if bytes.Equal(yaml, llmstub.DefaultScriptYAML()) {
		t.Fatal("the llm-stub's default script has no 3s delay to shorten")
	}
	start := func(opts stack.Options) *stack.Stack {
		script, err := llmstub.ParseScript(yaml)
		if err != nil {
			t.Fatal(err)
		}
		opts.KeepAlive, opts.StubScript = testKeepAlive, script
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
	svc, err := server.LookupConfig(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	svc.MaxBodyBytes, svc.MaxInFlight, svc.MaxTickets = testLimits.MaxBodyBytes, testLimits.MaxInFlight, testLimits.MaxTickets
	return &testStack{
		main:   start(stack.Options{}),
		small:  start(stack.Options{MaxEvents: 8}),
		limits: start(stack.Options{Service: &svc, Deadline: testLimits.Deadline, TTL: testLimits.TTL}),
	}
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
	}
}

// idpFor returns the IdP of the stack whose service is at target.
func (st *testStack) idpFor(target string) *idp.IdP {
	switch target {
	case st.small.AskURL:
		return st.small.IdP
	case st.limits.AskURL:
		return st.limits.IdP
	}
	return st.main.IdP
}
