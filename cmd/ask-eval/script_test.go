package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestScriptKeepsTheExitStatus: scripts/eval.sh (make eval) must hand back ask-eval's own exit
// status, so that a script can tell "the scores differ from --expect" (1) from "it could not run"
// (2), as docs/eval.md says. `go run` would turn every failure into 1.
func TestScriptKeepsTheExitStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/ask-eval")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join("scripts", "eval.sh"))
	cmd.Dir = root
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "URL", "SET", "OUT", "TOKENS", "IDP", "BIN":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "SET=does-not-exist.yaml", "BIN="+t.TempDir())
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("scripts/eval.sh with a missing set: %v, want exit status 2\n%s", err, errb.String())
	}
	if exit.ExitCode() != 2 || !strings.Contains(errb.String(), "does-not-exist.yaml") {
		t.Errorf("scripts/eval.sh with a missing set: exit %d, want 2 (could not run)\n%s", exit.ExitCode(), errb.String())
	}
}

// TOKENS reach ask-eval through its environment, never its arguments, which every user of the
// machine can read in ps. A stand-in for go writes a stand-in ask-eval that prints what it got.
func TestScriptKeepsTokensOffTheCommandLine(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fakeGo := filepath.Join(dir, "go")
	// "go build -o BIN/ask-eval ./cmd/ask-eval": write BIN/ask-eval as a script.
	if err := os.WriteFile(fakeGo, []byte("#!/usr/bin/env bash\nprintf '#!/usr/bin/env bash\\necho \"args: $*\"\\necho \"env: $ASK_EVAL_TOKENS\"\\n' > \"$3\"\nchmod +x \"$3\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join("scripts", "eval.sh"))
	cmd.Dir = root
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "URL", "SET", "OUT", "TOKENS", "IDP", "BIN", "GO", "ASK_EVAL_TOKENS":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	const bearer = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0.c2ln"
	cmd.Env = append(cmd.Env, "GO="+fakeGo, "BIN="+dir, "URL=http://127.0.0.1:1/ask", "TOKENS=alice="+bearer+" bob=b")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/eval.sh: %v\n%s", err, out)
	}
	args, env, _ := strings.Cut(string(out), "\nenv: ")
	if !strings.HasPrefix(args, "args: ") || strings.Contains(args, bearer) || strings.Contains(args, "--token") {
		t.Errorf("ask-eval's arguments carry the tokens: %q", args)
	}
	if strings.TrimSpace(env) != "alice="+bearer+" bob=b" {
		t.Errorf("ASK_EVAL_TOKENS is %q, want TOKENS", env)
	}
}

// TestScriptMintsFromASK_IDP: make eval URL=… mints from $ASK_IDP, the IdP's name for the ask CLI
// and make token; the script read only IDP, and passed --idp http://127.0.0.1:8090, which beat
// the ASK_IDP_URL ask-eval reads too. IDP and ASK_IDP_URL, the older names, win beside ASK_IDP.
// A stand-in for go writes a stand-in ask-eval that prints its arguments.
func TestScriptMintsFromASK_IDP(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fakeGo := filepath.Join(dir, "go")
	if err := os.WriteFile(fakeGo, []byte("#!/usr/bin/env bash\nprintf '#!/usr/bin/env bash\\necho \"$*\"\\n' > \"$3\"\nchmod +x \"$3\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const url = "URL=http://127.0.0.1:1/ask"
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
		cmd := exec.Command("bash", filepath.Join("scripts", "eval.sh"))
		cmd.Dir = root
		for _, kv := range os.Environ() {
			switch strings.SplitN(kv, "=", 2)[0] {
			case "URL", "SET", "OUT", "TOKENS", "IDP", "ASK_IDP", "ASK_IDP_URL", "BIN", "GO", "ASK_EVAL_TOKENS":
				continue
			}
			cmd.Env = append(cmd.Env, kv)
		}
		cmd.Env = append(cmd.Env, "GO="+fakeGo, "BIN="+dir)
		cmd.Env = append(cmd.Env, c.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: scripts/eval.sh: %v\n%s", c.name, err, out)
		}
		args := strings.Fields(string(out))
		idp := ""
		for i, a := range args {
			if a == "--idp" && i+1 < len(args) {
				idp = args[i+1]
			}
		}
		if idp != c.want {
			t.Errorf("%s: ask-eval was given %q; want --idp %q", c.name, args, c.want)
		}
	}
}
