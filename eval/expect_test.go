package eval_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/das-ask/ask/eval"
)

// An expectation that cannot fail a run is refused when it is read, not passed at the end: a CI
// step checking it would pass a service that answers nothing. A .nan compares false with every
// score, so it passed whatever the run scored, as a bound of .inf did, and a confusion row with
// no counts (answer: and nothing under it) checked nothing.
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
		{"a score of .nan", "scores: {outcome_accuracy: .nan}\n", "scores: outcome_accuracy is NaN, not a finite number"},
		{"a bound of .nan", "at_most: {terminal_p95_ms: .nan}\n", "at_most: terminal_p95_ms is NaN, not a finite number"},
		{"a bound of .inf", "at_most: {terminal_p95_ms: .inf}\n", "at_most: terminal_p95_ms is +Inf, not a finite number"},
		{"a confusion row of nothing", "confusion:\n  answer:\n", "expects nothing"},
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
