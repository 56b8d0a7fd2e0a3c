package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/das-ask/ask/config"
)

func TestFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		ok   bool
	}{
		{"url and idp", []string{"--url", "http://x/ask", "--idp", "http://i"}, nil, true},
		{"url and tokens from env", []string{"--url", "http://x/ask"}, map[string]string{"ASK_TOKEN_A": "a", "ASK_TOKEN_B": "b"}, true},
		{"url without identities", []string{"--url", "http://x/ask"}, nil, false},
		{"one token only", []string{"--url", "http://x/ask", "--token-a", "a"}, nil, false},
		{"nothing to check", nil, nil, false},
		{"dev stack", []string{"--dev-stack", "--behaviour"}, map[string]string{"ASK_URL": "http://ignored"}, true},
		{"dev stack and a url", []string{"--dev-stack", "--url", "http://x/ask"}, nil, false},
		{"dev stack and a limits target", []string{"--dev-stack", "--limits-url", "http://x/ask"}, nil, false},
		{"phase 2 from env", []string{"--url", "http://x/ask", "--idp", "http://i"}, map[string]string{"ASK_PHASE": "2"}, true},
		{"an invalid phase in env", []string{"--url", "http://x/ask", "--idp", "http://i"}, map[string]string{"ASK_PHASE": "two"}, false},
		{"dev stack and a bound", []string{"--dev-stack", "--max-events", "8"}, nil, false},
		{"a limits target with its settings", []string{"--url", "http://x/ask", "--idp", "http://i", "--limits-url", "http://y/ask", "--limits-ttl", "3s", "--limits-max-tickets", "6"}, nil, true},
		{"gateway without the dev stack", []string{"--gateway", "--url", "http://x/ask", "--idp", "http://i"}, nil, false},
		{"stray argument", []string{"--url", "http://x/ask", "--idp", "http://i", "extra"}, nil, false},
		// A negative bound or count was read as "unset", its default, unsaid.
		{"a negative run timeout", []string{"--url", "http://x/ask", "--idp", "http://i", "--run-timeout", "-5s"}, nil, false},
		{"a negative slow wait", []string{"--url", "http://x/ask", "--idp", "http://i", "--slow-wait", "-1s"}, nil, false},
		{"a negative keep-alive", []string{"--url", "http://x/ask", "--idp", "http://i", "--keepalive", "-1s"}, nil, false},
		{"a negative max-events", []string{"--url", "http://x/ask", "--idp", "http://i", "--max-events", "-8"}, nil, false},
		{"a negative limits ttl", []string{"--url", "http://x/ask", "--idp", "http://i", "--limits-url", "http://y/ask", "--limits-ttl", "-3s"}, nil, false},
		{"a zero gateway read timeout", []string{"--dev-stack", "--gateway", "--gateway-read-timeout", "0s"}, nil, false},
		// --limits-max-body is an int64: a negative one skipped the 413 check as if not given.
		{"a negative limits max body", []string{"--url", "http://x/ask", "--idp", "http://i", "--limits-url", "http://y/ask", "--limits-max-body", "-5"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(tt.args, io.Discard, config.MapEnv(tt.env))
			if (err == nil) != tt.ok {
				t.Errorf("parse(%v) error %v, want ok=%v", tt.args, err, tt.ok)
			}
		})
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--url", "http://127.0.0.1:1/ask"}, &out, &errOut, config.MapEnv(nil))
	if code != 2 || !strings.Contains(errOut.String(), "--idp") {
		t.Errorf("exit %d, stderr %q; want 2 naming --idp", code, errOut.String())
	}
}

func TestUnreachableTargetFailsChecks(t *testing.T) {
	var out bytes.Buffer
	code := run(context.Background(), []string{"--url", "http://127.0.0.1:1/ask", "--token-a", "a", "--token-b", "b", "--only", "^auth.no-bearer$"}, &out, io.Discard, config.MapEnv(nil))
	if code != 1 || !strings.HasPrefix(out.String(), "FAIL auth.no-bearer") || !strings.HasSuffix(out.String(), "0 passed, 1 failed, 0 skipped\n") {
		t.Errorf("exit %d, output %q; want 1 and one FAIL", code, out.String())
	}
}

// TestHelpExits0: the usage asked for is printed and is not an error.
func TestHelpExits0(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{arg}, &out, &errOut, config.MapEnv(nil)); code != 0 {
			t.Errorf("%s: exit %d, want 0", arg, code)
		}
		if !strings.Contains(errOut.String(), "-url") {
			t.Errorf("%s: stderr %q, want the usage", arg, errOut.String())
		}
	}
}

// The bearers and the webhook secrets come from the environment when no flag gives them, but
// never appear in the usage a mistyped flag or -h prints to stderr (a CI log). Until 2026-12-05
// they were the flags' defaults, and the usage printed them.
func TestUsageNeverShowsTheSecrets(t *testing.T) {
	env := map[string]string{
		"ASK_TOKEN_A": "eyJ.tokenA.c2lnLWE", "ASK_TOKEN_B": "eyJ.tokenB.c2lnLWI",
		"ASK_WEBHOOK_SECRETS": "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
	}
	for _, args := range [][]string{{"--no-such-flag"}, {"-h"}} {
		var stderr bytes.Buffer
		if _, err := parse(args, &stderr, config.MapEnv(env)); err == nil {
			t.Fatalf("parse(%q) succeeded, want a usage error", args)
		}
		if !strings.Contains(stderr.String(), "-token-a") {
			t.Fatalf("parse(%q) printed no usage: the check would prove nothing: %q", args, stderr.String())
		}
		for name, secret := range env {
			if strings.Contains(stderr.String(), secret) {
				t.Errorf("parse(%q) printed %s: %q", args, name, stderr.String())
			}
		}
	}
	o, err := parse([]string{"--url", "http://x/ask"}, io.Discard, config.MapEnv(env))
	if err != nil || o.tokenA != env["ASK_TOKEN_A"] || o.tokenB != env["ASK_TOKEN_B"] || o.webhookSecrets != env["ASK_WEBHOOK_SECRETS"] {
		t.Fatalf("without flags, the secrets are not the environment's: %v", err)
	}
	o, err = parse([]string{"--url", "http://x/ask", "--token-a", "a", "--token-b", "b"}, io.Discard, config.MapEnv(env))
	if err != nil || o.tokenA != "a" || o.tokenB != "b" {
		t.Fatalf("the flags do not win over the environment: %v", err)
	}
}

// TestIdPFromTheEnvironment: ASK_IDP, the IdP's name for the ask CLI and make token, is the
// suite's --idp too; it read only ASK_IDP_URL, and a caller who had exported ASK_IDP was told
// "give --idp". ASK_IDP_URL still works and wins beside it; --idp wins over both.
func TestIdPFromTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"ASK_IDP", nil, map[string]string{"ASK_IDP": "http://idp"}, "http://idp"},
		{"ASK_IDP_URL", nil, map[string]string{"ASK_IDP_URL": "http://old"}, "http://old"},
		{"both", nil, map[string]string{"ASK_IDP": "http://idp", "ASK_IDP_URL": "http://old"}, "http://old"},
		{"--idp", []string{"--idp", "http://flag"}, map[string]string{"ASK_IDP": "http://idp", "ASK_IDP_URL": "http://old"}, "http://flag"},
	} {
		o, err := parse(append([]string{"--url", "http://x/ask"}, c.args...), io.Discard, config.MapEnv(c.env))
		if err != nil || o.idp != c.want {
			t.Errorf("%s: --idp %q (%v), want %q", c.name, o.idp, err, c.want)
		}
	}
}
