package eval_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/eval"
)

// The summary is what a terminal and CI show, with or without a report written: items that gave
// no outcome are explained there, each distinct reason once with how often and for which items,
// not left to "see the report".
func TestSummaryExplainsHarnessErrors(t *testing.T) {
	down := "creating the conversation: dial tcp 127.0.0.1:8080: connect: connection refused"
	res := []eval.ItemResult{
		{ID: "a", Expect: "answer", Got: "answer", TicketMS: 1, FirstMilestoneMS: 1, TerminalMS: 1, HasDone: true},
		{ID: "b", Expect: "answer", Got: "error", ErrorKind: "harness", Detail: down, TicketMS: -1, FirstMilestoneMS: -1, TerminalMS: -1},
		{ID: "c", Expect: "refusal", Got: "error", ErrorKind: "harness", Detail: down, TicketMS: -1, FirstMilestoneMS: -1, TerminalMS: -1},
		{ID: "d", Expect: "answer", Got: "error", ErrorKind: "harness", Detail: "following the events: client: no progress after 8 attempts", TicketMS: 2, FirstMilestoneMS: -1, TerminalMS: -1},
	}
	rep := &eval.Report{Target: "http://127.0.0.1:8080/ask", Model: "m", Set: eval.Set{Name: "t"}, Scores: eval.Score(res), Items: res}
	var b strings.Builder
	if err := rep.WriteSummary(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"harness errors       3", "2× " + down + " (b, c)", "1× following the events: client: no progress after 8 attempts (d)",
		// The latencies and the usage are over the items that got that far, and say so.
		"ticket 1 ms / 2 ms (2 of 4)", "first milestone 1 ms / 1 ms (1 of 4)", "terminal 1 ms / 1 ms (1 of 4)", "(over the 1 of 4 asks that reached done)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "see the report") {
		t.Errorf("summary points at a report that may not have been written:\n%s", b.String())
	}
}

func writeReport(t *testing.T, rep *eval.Report) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "report.json")
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func report(set string, items ...eval.ItemResult) *eval.Report {
	return &eval.Report{Date: time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC), Model: "m", Set: eval.Set{Name: set}, Scores: eval.Score(items), Items: items}
}

func item(id string, terminalMS float64) eval.ItemResult {
	return eval.ItemResult{ID: id, Expect: "abstention", Got: "abstention", TicketMS: terminalMS, FirstMilestoneMS: -1, TerminalMS: terminalMS, HasDone: true}
}

// A file that is JSON but no report — an empty object, another tool's output — is refused as a
// baseline, not diffed as a run that scored nothing.
func TestReadReportRefusesWhatIsNotOne(t *testing.T) {
	for _, body := range []string{`{}`, `{"date": "2026-12-05T04:00:00Z"}`, `null`} {
		path := filepath.Join(t.TempDir(), "x.json")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := eval.ReadReport(path); err == nil || !strings.Contains(err.Error(), "not a report.json written by ask-eval") {
			t.Errorf("%s: got %v, want it refused", body, err)
		}
	}
	if _, err := eval.ReadReport(writeReport(t, report("s", item("a", 1)))); err != nil {
		t.Errorf("a report: %v", err)
	}
}

// The difference is the same every time for the same two reports (items gone from the set in
// the baseline's order), says when the sets differ, and calls equal what it shows as equal.
func TestDiff(t *testing.T) {
	var gone []eval.ItemResult
	var want []string
	for i := range 12 {
		id := fmt.Sprintf("item-%02d", i)
		gone = append(gone, item(id, 2))
		want = append(want, "  "+id+": no longer in the set")
	}
	base := report("old-set", append(gone, item("kept", 2))...)
	unread := eval.ItemResult{ID: "unread", Expect: "abstention", Got: "error", ErrorKind: "harness", TicketMS: -1, FirstMilestoneMS: -1, TerminalMS: -1}
	cur := report("new-set", item("kept", 1.6), unread)
	for range 3 {
		var b strings.Builder
		if err := eval.Diff(&b, base, cur); err != nil {
			t.Fatal(err)
		}
		got := b.String()
		if !strings.Contains(got, strings.Join(want, "\n")) {
			t.Fatalf("items gone, not in the baseline's order:\n%s", got)
		}
		if !strings.Contains(got, "note: the baseline ran set old-set (13 items), this run set new-set (2 items)") {
			t.Errorf("the difference does not say the sets differ:\n%s", got)
		}
		if !regexp.MustCompile(`harness_errors +0\.00 → 1\.00 +\+1\.00 worse\n`).MatchString(got) {
			t.Errorf("a harness error more is not called worse:\n%s", got)
		}
		if !regexp.MustCompile(`terminal_p50_ms +2 ms → 2 ms +=\n`).MatchString(got) {
			t.Errorf("2 ms → 2 ms is not shown as equal:\n%s", got)
		}
	}
}

// The change is the difference of the figures as shown: 4.4 ms → 5.6 ms reads 4 ms → 6 ms, and
// its change +2 ms (not the +1 ms of the values, which does not add up on the page).
func TestDiffChangeAddsUpAsShown(t *testing.T) {
	var b strings.Builder
	if err := eval.Diff(&b, report("s", item("x", 4.4)), report("s", item("x", 5.6))); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`terminal_p50_ms +4 ms → 6 ms +\+2 ms slower\n`).MatchString(b.String()) {
		t.Errorf("the change is not the shown figures' difference:\n%s", b.String())
	}
	// A half is shown rounded to even (fmt): 4.5 ms reads 4 ms, and 5.5 ms 6 ms: +2 ms.
	b.Reset()
	if err := eval.Diff(&b, report("s", item("x", 4.5)), report("s", item("x", 5.5))); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`terminal_p50_ms +4 ms → 6 ms +\+2 ms slower\n`).MatchString(b.String()) {
		t.Errorf("the change of halves is not the shown figures' difference:\n%s", b.String())
	}
}

// An item that lost its attribution or its caveats changed, and the difference names it and
// says how, as the scores above it do.
func TestDiffNamesItemsThatLostAttributionOrCaveats(t *testing.T) {
	yes, no := true, false
	answered := func(id string, attributed, caveats *bool) eval.ItemResult {
		return eval.ItemResult{ID: id, Expect: "answer", Got: "answer", Correct: &yes, Attributed: attributed, CaveatsCarried: caveats,
			TicketMS: 1, FirstMilestoneMS: 1, TerminalMS: 1, HasDone: true}
	}
	base := report("s", answered("attr", &yes, &yes), answered("cav", &yes, &yes), answered("same", &yes, &yes))
	cur := report("s", answered("attr", &no, &yes), answered("cav", &yes, &no), answered("same", &yes, &yes))
	var b strings.Builder
	if err := eval.Diff(&b, base, cur); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  attr: answer (correct) → answer (correct), unattributed (expected answer)",
		"  cav: answer (correct) → answer (correct), caveats missing (expected answer)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("difference lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "same:") {
		t.Errorf("an item that did not change is listed:\n%s", b.String())
	}
}

// An item that expects an error and got one, then had no outcome read (a harness error, which is
// never as expected), lowers outcome accuracy: the difference names it, and does not say that no
// item changed.
func TestDiffNamesAnItemWhoseOutcomeWasNoLongerRead(t *testing.T) {
	failed := eval.ItemResult{ID: "fails", Expect: "error", Got: "error", ErrorKind: "internal", TicketMS: 1, FirstMilestoneMS: -1, TerminalMS: 1, HasDone: true}
	unread := eval.ItemResult{ID: "fails", Expect: "error", Got: "error", ErrorKind: "harness", TicketMS: 1, FirstMilestoneMS: -1, TerminalMS: 1, HasDone: true}
	var b strings.Builder
	if err := eval.Diff(&b, report("s", failed), report("s", unread)); err != nil {
		t.Fatal(err)
	}
	if want := "  fails: error → no outcome read (expected error)"; !strings.Contains(b.String(), want) {
		t.Errorf("difference lacks %q:\n%s", want, b.String())
	}
}
