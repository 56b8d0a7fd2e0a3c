package eval

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Expectation is what a run must score, for a set whose scores are known by construction (the
// CI fixture): metrics that must equal a value, metrics that must not exceed one (latencies),
// and the confusion matrix.
type Expectation struct {
	Scores    map[string]float64        `yaml:"scores"`
	AtMost    map[string]float64        `yaml:"at_most"`
	Confusion map[string]map[string]int `yaml:"confusion"`
}

// LoadExpectation reads an expectation file (YAML).
func LoadExpectation(path string) (*Expectation, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("expectation: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var e Expectation
	if err := dec.Decode(&e); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("expectation %s: the file is empty", path)
		}
		return nil, fmt.Errorf("expectation %s: %s", path, oneLine(err))
	}
	// What an expectation cannot check passes every run: a second document, a kind misspelt in
	// the confusion matrix (its count is read as 0), a file that expects nothing.
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("expectation %s: more than one YAML document (remove the ---)", path)
	}
	checks := len(e.Scores) + len(e.AtMost)
	for _, row := range e.Confusion {
		checks += len(row)
	}
	if checks == 0 {
		return nil, fmt.Errorf("expectation %s: expects nothing (give scores, at_most or confusion)", path)
	}
	// A NaN compares false with every score, so it would pass any; a bound of +Inf bounds nothing.
	for section, m := range map[string]map[string]float64{"scores": e.Scores, "at_most": e.AtMost} {
		for _, name := range sortedKeys(m) {
			if v := m[name]; math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("expectation %s: %s: %s is %v, not a finite number", path, section, name, v)
			}
		}
	}
	for exp, row := range e.Confusion {
		for _, k := range append([]string{exp}, sortedKeys(row)...) {
			if !slices.Contains(Kinds, k) {
				return nil, fmt.Errorf("expectation %s: confusion: %q is not an outcome kind (%s)", path, k, strings.Join(Kinds, ", "))
			}
		}
	}
	return &e, nil
}

// Check returns one line per way s differs from the expectation; none when it matches. A
// metric the expectation names that the scores do not have is a difference, so a typo cannot
// pass.
func (e *Expectation) Check(s Scores) []string {
	got := map[string]*float64{}
	for _, m := range s.Metrics() {
		got[m.Name] = m.Value
	}
	var out []string
	for _, name := range sortedKeys(e.Scores) {
		want := e.Scores[name]
		v, ok := got[name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: no such score", name))
		case v == nil:
			out = append(out, fmt.Sprintf("%s: nothing to score, expected %g", name, want))
		case math.Abs(*v-want) > 5e-4:
			out = append(out, fmt.Sprintf("%s: %.4g, expected %g", name, *v, want))
		}
	}
	for _, name := range sortedKeys(e.AtMost) {
		limit := e.AtMost[name]
		v, ok := got[name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: no such score", name))
		case v == nil:
			out = append(out, fmt.Sprintf("%s: nothing measured, expected at most %g", name, limit))
		case *v > limit:
			out = append(out, fmt.Sprintf("%s: %.4g, expected at most %g", name, *v, limit))
		}
	}
	for _, exp := range sortedKeys(e.Confusion) {
		for _, g := range sortedKeys(e.Confusion[exp]) {
			if n := s.Confusion[exp][g]; n != e.Confusion[exp][g] {
				out = append(out, fmt.Sprintf("confusion %s→%s: %d, expected %d", exp, g, n, e.Confusion[exp][g]))
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
