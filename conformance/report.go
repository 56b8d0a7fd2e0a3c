package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Status is a check's verdict.
type Status string

const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Result is one check's verdict with its detail: on PASS what was seen, on FAIL what was
// expected and what was seen, on SKIP why the check could not be made against this target.
type Result struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Report is every check's result, in the order the checks ran.
type Report struct {
	Results []Result `json:"results"`
}

// Counts returns how many checks passed, failed and were skipped.
func (r Report) Counts() (passed, failed, skipped int) {
	for _, res := range r.Results {
		switch res.Status {
		case Pass:
			passed++
		case Fail:
			failed++
		case Skip:
			skipped++
		}
	}
	return passed, failed, skipped
}

// Failed reports whether any check failed.
func (r Report) Failed() bool {
	_, f, _ := r.Counts()
	return f > 0
}

// Result returns the named check's result and whether it ran.
func (r Report) Result(name string) (Result, bool) {
	for _, res := range r.Results {
		if res.Name == name {
			return res, true
		}
	}
	return Result{}, false
}

// Summary is the closing line: "N passed, M failed, K skipped".
func (r Report) Summary() string {
	p, f, s := r.Counts()
	return fmt.Sprintf("%d passed, %d failed, %d skipped", p, f, s)
}

// WriteText writes one line per check, "STATUS name — detail", then the summary line.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, res := range r.Results {
		b.WriteString(string(res.Status) + " " + res.Name)
		if res.Detail != "" {
			b.WriteString(" — " + res.Detail)
		}
		b.WriteByte('\n')
	}
	b.WriteString(r.Summary() + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as one JSON object with the results and the counts.
func (r Report) WriteJSON(w io.Writer) error {
	p, f, s := r.Counts()
	return json.NewEncoder(w).Encode(struct {
		Results []Result `json:"results"`
		Passed  int      `json:"passed"`
		Failed  int      `json:"failed"`
		Skipped int      `json:"skipped"`
	}{r.Results, p, f, s})
}
