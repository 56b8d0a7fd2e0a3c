package main

import (
	"bytes"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"github.com/das-ask/ask/conformance"
	"github.com/das-ask/ask/demo/llmstub"
	"github.com/das-ask/ask/demo/stack"
)

// The gateway checks against nginx itself: each must fail when what it proves is absent — the
// survival check against a service without keep-alives, the control against a gateway whose
// idle timeout is longer than the silence.
func TestGatewayChecksFailWhenTheirPremiseIsAbsent(t *testing.T) {
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx is not installed (apt-get install -y nginx-light); make conformance-gateway installs it")
	}
	const silence = 2500 * time.Millisecond
	yaml := bytes.Replace(llmstub.DefaultScriptYAML(), []byte("delay: 3s"), []byte("delay: "+silence.String()), 1)
	start := func(keepAlive time.Duration) *stack.Stack {
		script, err := llmstub.ParseScript(yaml)
		if err != nil {
			t.Fatal(err)
		}
		s, err := stack.Start(t.Context(), stack.Options{KeepAlive: keepAlive, StubScript: script})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	talking, quiet := start(300*time.Millisecond), start(time.Hour)
	gw := func(readTimeout time.Duration) *gateway {
		g, err := startGateway(t.Context(), gatewayOptions{
			nginx: "nginx", template: "../../deploy/nginx/ask.conf", readTimeout: readTimeout,
			upstreams: []string{talking.AskURL, quiet.AskURL}, logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := g.stop(); err != nil {
				t.Error(err)
			}
		})
		return g
	}
	short, long := gw(time.Second), gw(10*time.Second)
	cfg := func(base string, s *stack.Stack) conformance.Config {
		return conformance.Config{BaseURL: base, Tokens: conformance.IdPTokens{URL: s.IdPURL}, SlowWait: silence, RunTimeout: 20 * time.Second}
	}
	for _, tt := range []struct {
		name string
		got  conformance.Result
		want conformance.Status
	}{
		{"keep-alives through a 1s timeout", silenceSurvives(t.Context(), cfg(short.urls[0], talking), time.Second), conformance.Pass},
		{"no keep-alives through a 1s timeout", silenceSurvives(t.Context(), cfg(short.urls[1], quiet), time.Second), conformance.Fail},
		{"control through a 1s timeout", silenceCutOff(t.Context(), cfg(short.urls[1], quiet), time.Second), conformance.Pass},
		{"control through a 10s timeout", silenceCutOff(t.Context(), cfg(long.urls[1], quiet), 10*time.Second), conformance.Fail},
	} {
		if tt.got.Status != tt.want {
			t.Errorf("%s: %s %s, want %s", tt.name, tt.got.Status, tt.got.Detail, tt.want)
		}
	}
}
