package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeTokenAsksTheIdPThatMakeAskDoes: make token mints from $ASK_IDP when it is set, the
// variable make ask (the ask CLI) reads for the same IdP. The banner of an ask-serve on other
// addresses puts ASK_URL and ASK_IDP before make ask; a caller who exported them and ran make
// token was sent to 127.0.0.1:8090 and told "no identity provider … start the dev stack (make
// ask-serve)" while it ran. An --idp in ARGS still wins. The go build and dev-idp are
// stand-ins: dev-idp prints the IdP it would ask, the last --idp as Go's flag package takes it,
// else its default.
func TestMakeTokenAsksTheIdPThatMakeAskDoes(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not installed")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fakeGo := filepath.Join(dir, "go")
	if err := os.WriteFile(fakeGo, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const fakeIdP = "#!/bin/sh\nidp=default\nwhile [ $# -gt 0 ]; do [ \"$1\" = --idp ] && idp=$2; shift; done\necho \"$idp\"\n"
	if err := os.WriteFile(filepath.Join(dir, "dev-idp"), []byte(fakeIdP), 0o755); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ASK_IDP=") && !strings.HasPrefix(kv, "MAKEFLAGS=") && !strings.HasPrefix(kv, "ARGS=") {
			env = append(env, kv)
		}
	}
	for _, c := range []struct {
		name, askIdP, args, want string
	}{
		{"unset", "", "", "default"},
		{"ASK_IDP", "http://127.0.0.1:26604", "", "http://127.0.0.1:26604"},
		{"ARGS wins", "http://127.0.0.1:26604", "--idp http://127.0.0.1:1", "http://127.0.0.1:1"},
	} {
		cmd := exec.Command("make", "-s", "token", "OID=bob", "ARGS="+c.args, "GO="+fakeGo, "BIN="+dir)
		cmd.Dir = root
		cmd.Env = append(env, "MAKEFLAGS=")
		if c.askIdP != "" {
			cmd.Env = append(cmd.Env, "ASK_IDP="+c.askIdP)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%s: make token: %v\n%s", c.name, err, out)
			continue
		}
		if got := strings.TrimSpace(string(out)); got != c.want {
			t.Errorf("%s: make token asked the IdP %q, want %q", c.name, got, c.want)
		}
	}
}
