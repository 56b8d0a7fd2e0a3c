package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeAskPassesTheQuestionAsTyped: make ask Q=… (README's way to ask) hands the CLI the
// question as typed. It put $(Q) in the recipe's text, so make expanded a $ ("What was the cost
// in $5?" lost its "$5") and the shell undid quotes and ran backquotes; the question now travels
// in the environment. The go build and the CLI are stand-ins: the CLI prints its arguments.
func TestMakeAskPassesTheQuestionAsTyped(t *testing.T) {
	root, fakeGo, dir := makeWithStandIn(t, "#!/bin/sh\nfor a in \"$@\"; do printf '[%s]\\n' \"$a\"; done\n")
	for _, q := range []string{
		"How many sev1 incidents did we have in 2026-Q2?",
		`What does "change failure rate" mean?`,
		"What's the cost in $5 or $(USD) or $$?",
		"Which team is `whoami`?",
	} {
		cmd := exec.Command("make", "-s", "ask", "Q="+q, "AS=bob", "GO="+fakeGo, "BIN="+dir)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "MAKEFLAGS=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("make ask Q=%q: %v\n%s", q, err, out)
			continue
		}
		if want := "[--as]\n[bob]\n[--]\n[" + q + "]\n"; string(out) != want {
			t.Errorf("make ask Q=%q gave the CLI\n%s\nwant\n%s", q, out, want)
		}
	}
	cmd := exec.Command("make", "-s", "ask", "GO="+fakeGo, "BIN="+dir)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "Q=")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "usage: make ask") {
		t.Errorf("make ask without Q: %v\n%s\nwant the usage and a failure", err, out)
	}
}

// TestMakeAskLeavesTheIdentityToTheCLI: make ask without AS= asks as the CLI would, $ASK_OID
// else alice. It passed --as alice whenever AS was not given, so a caller who had exported
// ASK_OID=bob (the ask CLI's variable for --as, README's Configuration) asked as alice and read
// what bob may not: make ask Q="What was the on-call pay per team in 2026-Q3?" printed the
// table where bin/ask printed bob's refusal. AS= still wins.
func TestMakeAskLeavesTheIdentityToTheCLI(t *testing.T) {
	// The stand-in CLI prints the identity it would ask as: --as when given, else $ASK_OID,
	// else alice, as cmd/ask decides.
	root, fakeGo, dir := makeWithStandIn(t, "#!/bin/sh\noid=${ASK_OID:-alice}\nif [ \"$1\" = --as ]; then oid=$2; fi\necho \"$oid\"\n")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AS=") && !strings.HasPrefix(kv, "ASK_OID=") && !strings.HasPrefix(kv, "MAKEFLAGS=") {
			env = append(env, kv)
		}
	}
	for _, c := range []struct {
		name    string
		askOID  string
		makeArg []string
		want    string
	}{
		{"neither", "", nil, "alice"},
		{"ASK_OID", "bob", nil, "bob"},
		{"AS wins", "bob", []string{"AS=carol"}, "carol"},
		{"AS alone", "", []string{"AS=bob"}, "bob"},
	} {
		args := append([]string{"-s", "ask", "Q=How many sev1 incidents did we have in 2026-Q2?", "GO=" + fakeGo, "BIN=" + dir}, c.makeArg...)
		cmd := exec.Command("make", args...)
		cmd.Dir = root
		cmd.Env = append(env, "MAKEFLAGS=")
		if c.askOID != "" {
			cmd.Env = append(cmd.Env, "ASK_OID="+c.askOID)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: make %v: %v\n%s", c.name, args, err, out)
			continue
		}
		if got := strings.TrimSpace(string(out)); got != c.want {
			t.Errorf("%s: make ask (ASK_OID=%q, %v) asked as %q, want %q", c.name, c.askOID, c.makeArg, got, c.want)
		}
	}
}

// makeWithStandIn readies a run of the repository's Makefile (root) whose go build does
// nothing (fakeGo, for GO=) and whose bin/ask (in dir, for BIN=) is the shell script cli; it
// skips the test where make is not installed.
func makeWithStandIn(t *testing.T, cli string) (root, fakeGo, dir string) {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	fakeGo = filepath.Join(dir, "go")
	if err := os.WriteFile(fakeGo, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ask"), []byte(cli), 0o755); err != nil {
		t.Fatal(err)
	}
	return root, fakeGo, dir
}
