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
