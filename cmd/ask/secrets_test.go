package main

import (
	"bytes"
	"strings"
	"testing"

	askconfig "github.com/das-ask/ask/config"
)

// The bearer and the webhook URL (which may itself be a credential) come from the environment
// when no flag gives them, but never appear in the usage a mistyped flag or -h prints to stderr
// (a CI log). Until 2026-12-05 they were the flags' defaults, and the usage printed both.
func TestUsageNeverShowsTheTokenOrWebhook(t *testing.T) {
	const token = "eyJhbGciOiJSUzI1NiJ9.eyJvaWQiOiJhbGljZSJ9.c2VjcmV0LXNpZ25hdHVyZQ"
	const hook = "https://hooks.example/services/T0K3N-in-the-path"
	env := askconfig.MapEnv(map[string]string{"ASK_URL": "http://ask.test/ask", "ASK_TOKEN": token, "ASK_WEBHOOK": hook, "XDG_STATE_HOME": t.TempDir()})
	for _, args := range [][]string{{"--no-such-flag", "q"}, {"-h"}, {"--token"}} {
		var stderr bytes.Buffer
		if c, _ := parseArgs(args, &stderr, env); c != nil {
			t.Fatalf("parseArgs(%q) = %+v, want a usage error", args, c)
		}
		if !strings.Contains(stderr.String(), "-token") {
			t.Fatalf("parseArgs(%q) printed no usage: the check would prove nothing: %q", args, stderr.String())
		}
		for name, secret := range map[string]string{"token": token, "webhook": hook} {
			if strings.Contains(stderr.String(), secret) {
				t.Errorf("parseArgs(%q) printed the %s from the environment: %q", args, name, stderr.String())
			}
		}
	}
	c, _ := parseArgs([]string{"q"}, &bytes.Buffer{}, env)
	if c == nil || c.token != token || c.webhook != hook {
		t.Fatalf("without flags, the token and webhook are not the environment's: %+v", c)
	}
	c, _ = parseArgs([]string{"--token", "flag-token", "--webhook", "https://other.example/h", "q"}, &bytes.Buffer{}, env)
	if c == nil || c.token != "flag-token" || c.webhook != "https://other.example/h" {
		t.Fatalf("the flags do not win over the environment: %+v", c)
	}
}
