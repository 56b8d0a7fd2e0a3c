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
