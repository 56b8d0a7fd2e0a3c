package openapi_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCheckGenerateCatchesDrift shows that `make check-generate` cannot pass when the contract
// changes without regenerating: it copies the contract, gen/ and the check into a scratch module,
// adds a field to the document, and expects the check to fail there (and to pass before the edit).
func TestCheckGenerateCatchesDrift(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator twice")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, p := range []string{"go.mod", "go.sum", "ask.go", "gen", "openapi", "scripts"} {
		if out, err := exec.Command("cp", "-r", filepath.Join(root, p), filepath.Join(dir, p)).CombinedOutput(); err != nil {
			t.Fatalf("cp %s: %v\n%s", p, err, out)
		}
	}
	check := func() (string, error) {
		cmd := exec.Command("bash", "scripts/check-generate.sh")
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := check(); err != nil {
		t.Fatalf("check-generate fails on an unchanged copy: %v\n%s", err, out)
	}
	spec := filepath.Join(dir, "openapi", "ask.openapi.yaml")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(b, []byte("        question:\n          type: string\n          minLength: 1\n"),
		[]byte("        priority:\n          type: integer\n        question:\n          type: string\n          minLength: 1\n"), 1)
	if bytes.Equal(edited, b) {
		t.Fatal("the edit did not apply; update the test's anchor text")
	}
	if err := os.WriteFile(spec, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := check()
	if err == nil {
		t.Fatalf("check-generate passed after the contract changed without regenerating:\n%s", out)
	}
	if !bytes.Contains([]byte(out), []byte("out of date")) {
		t.Errorf("check-generate failed for another reason:\n%s", out)
	}
	if len(out) > 400 {
		out = out[:400]
	}
	t.Logf("check-generate after an unregenerated edit:\n%s", out)
}
