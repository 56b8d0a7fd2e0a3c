package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestScriptKeepsTheExitStatus: scripts/conformance-ask.sh (make conformance-ask) must hand back
// the suite's own exit status, 2 when it could not run and 1 when a check failed, as
// conformance/README.md says. `go run` would turn every failure into 1.
func TestScriptKeepsTheExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/conformance")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join("scripts", "conformance-ask.sh"), "--only", "(")
	cmd.Dir = root
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "URL", "IDP", "AUDIT", "ASK_TOKEN_A", "ASK_TOKEN_B", "ASK_PHASE", "BIN":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	// A URL nothing listens on: the invalid --only stops the suite before it calls anything.
	cmd.Env = append(cmd.Env, "URL=http://127.0.0.1:1/ask", "BIN="+t.TempDir())
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("scripts/conformance-ask.sh --only '(': %v, want exit status 2\n%s", err, errb.String())
	}
	if exit.ExitCode() != 2 || !strings.Contains(errb.String(), "--only") {
		t.Errorf("scripts/conformance-ask.sh --only '(': exit %d, want 2 (could not run)\n%s", exit.ExitCode(), errb.String())
	}
}

// scriptArgs runs scripts/conformance-ask.sh with env and args, its go build and the suite both
// stand-ins, and returns the arguments the suite was given.
func scriptArgs(t *testing.T, env []string, args ...string) []string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fakeGo := filepath.Join(dir, "go")
	if err := os.WriteFile(fakeGo, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "conformance"), []byte("#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{filepath.Join("scripts", "conformance-ask.sh")}, args...)...)
	cmd.Dir = root
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "URL", "IDP", "ASK_IDP", "ASK_IDP_URL", "AUDIT", "ASK_TOKEN_A", "ASK_TOKEN_B", "ASK_PHASE", "BIN", "GO":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "GO="+fakeGo, "BIN="+dir)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/conformance-ask.sh %q: %v", args, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}

func holds(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// TestScriptUsesTheCallersTokens: README's command against someone else's service, make
// conformance-ask URL=… ARGS="--token-a $A --token-b $B", checks with those tokens. The script
// added --idp whenever ASK_TOKEN_A and ASK_TOKEN_B were unset, and the suite, given both, minted
// its tokens from the local dev IdP and never used the caller's.
func TestScriptUsesTheCallersTokens(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     []string
		args    []string
		wantIdP bool
	}{
		{"tokens in ARGS", []string{"URL=https://ask.example.internal/ask"}, []string{"--token-a", "A", "--token-b", "B", "--behaviour"}, false},
		{"tokens in ARGS, one dash and =", []string{"URL=https://ask.example.internal/ask"}, []string{"-token-a=A", "-token-b=B"}, false},
		{"tokens in the environment", []string{"URL=https://ask.example.internal/ask", "ASK_TOKEN_A=A", "ASK_TOKEN_B=B"}, nil, false},
		{"no tokens", []string{"URL=http://127.0.0.1:8080/ask"}, []string{"--behaviour"}, true},
	} {
		got := scriptArgs(t, c.env, c.args...)
		if holds(got, "--idp") != c.wantIdP {
			t.Errorf("%s: the suite was given %q; want --idp: %v", c.name, got, c.wantIdP)
		}
		for _, a := range c.args {
			if !slices.Contains(got, a) {
				t.Errorf("%s: the suite was given %q, without the caller's %q", c.name, got, a)
			}
		}
	}
}

// TestScriptAuditsOnlyThisMachine: the default audit logs are the demo source's on this
// machine; README's command against someone else's service (a URL elsewhere, no AUDIT) read
// them too, and the three audit checks failed on a log the target's sources never wrote (or on
// no log at all) where, given none, they skip. AUDIT still names any.
func TestScriptAuditsOnlyThisMachine(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string // the --audit value, "" for none
	}{
		{"elsewhere", []string{"URL=https://ask.example.internal/ask"}, []string{"--token-a", "A", "--token-b", "B"}, ""},
		{"elsewhere, AUDIT set", []string{"URL=https://ask.example.internal/ask", "AUDIT=https://src.example.internal"}, nil, "https://src.example.internal"},
		{"elsewhere, a loopback-looking name", []string{"URL=http://127.0.0.1.example.com/ask"}, nil, ""},
		{"the dev stack", []string{"URL=http://127.0.0.1:8080/ask"}, nil, "http://127.0.0.1:8091"},
		{"localhost", []string{"URL=http://localhost:8080/ask"}, nil, "http://127.0.0.1:8091"},
		{"the dev stack, phase 2", []string{"URL=http://127.0.0.1:8080/ask"}, []string{"--phase2"}, "http://127.0.0.1:8091,http://127.0.0.1:8093"},
		{"the dev stack, AUDIT empty", []string{"URL=http://127.0.0.1:8080/ask", "AUDIT="}, nil, ""},
		// A stack moved off the default ports: its source is not on 8091, and reading 8091's log
		// (another stack's, or none) failed two audit checks.
		{"a moved dev stack", []string{"URL=http://127.0.0.1:18080/ask"}, nil, ""},
		{"a moved dev stack, AUDIT set", []string{"URL=http://127.0.0.1:18080/ask", "AUDIT=http://127.0.0.1:18091"}, nil, "http://127.0.0.1:18091"},
	} {
		got := scriptArgs(t, c.env, c.args...)
		audit := ""
		if i := slices.Index(got, "--audit"); i >= 0 && i+1 < len(got) {
			audit = got[i+1]
		}
		if audit != c.want {
			t.Errorf("%s: the suite was given %q; want --audit %q", c.name, got, c.want)
		}
	}
}

// TestScriptMintsFromASK_IDP: make conformance-ask URL=… mints from $ASK_IDP, the IdP's name for
// the ask CLI and make token; the script read only IDP, and passed --idp http://127.0.0.1:8090,
// which beat the ASK_IDP_URL the suite reads too. IDP and ASK_IDP_URL, the older names, win
// beside ASK_IDP.
func TestScriptMintsFromASK_IDP(t *testing.T) {
	const url = "URL=http://127.0.0.1:8080/ask"
	for _, c := range []struct {
		name string
		env  []string
		want string
	}{
		{"none", []string{url}, "http://127.0.0.1:8090"},
		{"ASK_IDP", []string{url, "ASK_IDP=http://127.0.0.1:26604"}, "http://127.0.0.1:26604"},
		{"ASK_IDP_URL", []string{url, "ASK_IDP_URL=http://127.0.0.1:26605"}, "http://127.0.0.1:26605"},
		{"IDP", []string{url, "IDP=http://127.0.0.1:26606"}, "http://127.0.0.1:26606"},
		{"ASK_IDP and ASK_IDP_URL", []string{url, "ASK_IDP=http://127.0.0.1:26604", "ASK_IDP_URL=http://127.0.0.1:26605"}, "http://127.0.0.1:26605"},
		{"ASK_IDP and IDP", []string{url, "ASK_IDP=http://127.0.0.1:26604", "IDP=http://127.0.0.1:26606"}, "http://127.0.0.1:26606"},
	} {
		got := scriptArgs(t, c.env)
		idp := ""
		if i := slices.Index(got, "--idp"); i >= 0 && i+1 < len(got) {
			idp = got[i+1]
		}
		if idp != c.want {
			t.Errorf("%s: the suite was given %q; want --idp %q", c.name, got, c.want)
		}
	}
}
