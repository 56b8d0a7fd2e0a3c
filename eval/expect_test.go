package eval_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/das-ask/ask/eval"
)

// An expectation that cannot fail a run is refused when it is read, not passed at the end: a CI
// step checking it would pass a service that answers nothing.
func TestLoadExpectationRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"an empty file", "", "the file is empty"},
		{"nothing expected", "scores: {}\n", "expects nothing"},
		{"a misspelt expected kind", "confusion:\n  answr: {answer: 0}\n", `"answr" is not an outcome kind`},
		{"a misspelt kind got", "confusion:\n  answer: {abstension: 0}\n", `"abstension" is not an outcome kind`},
		{"a second document", "scores: {harness_errors: 0}\n---\nscores: {outcome_accuracy: 1}\n", "more than one YAML document"},
		{"an unknown field", "score: {harness_errors: 0}\n", `unknown field "score"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "e.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := eval.LoadExpectation(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// The fixture's own expectation is read.
	if _, err := eval.LoadExpectation(filepath.Join("testdata", "fixture.expect.yaml")); err != nil {
		t.Fatal(err)
	}
}
