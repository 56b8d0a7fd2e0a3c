package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Report is one run of a set against one service and model: what the JSON file holds and the
// Markdown file shows.
type Report struct {
	Date   time.Time `json:"date"`
	Commit string    `json:"commit"`
	// Model names the model behind the service (as the operator says; the API does not).
	Model string `json:"model"`
	// Target is where the set was asked: a URL, or "dev stack (…)".
	Target      string       `json:"target"`
	Set         Set          `json:"set"`
	Concurrency int          `json:"concurrency"`
	ElapsedMS   float64      `json:"elapsed_ms"`
	Scores      Scores       `json:"scores"`
	Items       []ItemResult `json:"items"`
}

// ReadReport reads a report written by WriteJSON.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("report %s: %w", path, err)
	}
	// Any JSON object decodes; one that lacks what every report has is another file, and a
	// difference from it would read as a run that improved on nothing.
	if r.Date.IsZero() || r.Set.Name == "" || r.Scores.Confusion == nil || r.Items == nil {
		return nil, fmt.Errorf("report %s: not a report.json written by ask-eval (no date, set, scores or items)", path)
	}
	return &r, nil
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func pct(r Ratio) string {
	if r.Value == nil {
		return "—"
	}
	return fmt.Sprintf("%.0f%% (%d/%d)", 100**r.Value, r.N, r.Of)
}

func msStr(v *float64) string {
	if v == nil {
		return "—"
	}
	if *v >= 10000 {
		return fmt.Sprintf("%.1f s", *v/1000)
	}
	return fmt.Sprintf("%.0f ms", math.Round(*v))
}

// WriteSummary writes the headline scores, a few lines for a terminal.
func (r *Report) WriteSummary(w io.Writer) error {
	s := r.Scores
	var b strings.Builder
	fmt.Fprintf(&b, "set %s (%d items) against %s, model %s\n", r.Set.Name, s.Items, r.Target, r.Model)
	fmt.Fprintf(&b, "  outcome accuracy     %s\n", pct(s.OutcomeAccuracy))
	fmt.Fprintf(&b, "  answer correctness   %s   (when answered %s)\n", pct(s.AnswerCorrectness), pct(s.CorrectWhenAnswered))
	fmt.Fprintf(&b, "  attribution          %s\n", pct(s.Attribution))
	fmt.Fprintf(&b, "  caveats carried      %s\n", pct(s.CaveatsCarried))
	fmt.Fprintf(&b, "  abstention           precision %s, recall %s\n", pct(s.Abstention.Precision), pct(s.Abstention.Recall))
	fmt.Fprintf(&b, "  refusal              precision %s, recall %s\n", pct(s.Refusal.Precision), pct(s.Refusal.Recall))
	l := s.Latency
	// A latency is measured only where its event came: an ask that timed out is in no
	// percentile, so the summary says over how many items each is, lest the slow look fast.
	over := func(q Quantiles) string {
		if q.N == s.Items {
			return ""
		}
		return fmt.Sprintf(" (%d of %d)", q.N, s.Items)
	}
	fmt.Fprintf(&b, "  latency p50/p95      ticket %s / %s%s, first milestone %s / %s%s, terminal %s / %s%s\n",
		msStr(l.Ticket.P50), msStr(l.Ticket.P95), over(l.Ticket), msStr(l.FirstMilestone.P50), msStr(l.FirstMilestone.P95), over(l.FirstMilestone),
		msStr(l.Terminal.P50), msStr(l.Terminal.P95), over(l.Terminal))
	asks := ""
	if s.PerAsk.Asks != s.Items {
		asks = fmt.Sprintf(" (over the %d of %d asks that reached done)", s.PerAsk.Asks, s.Items)
	}
	fmt.Fprintf(&b, "  per ask              %.1f model calls, %.0f input + %.0f output tokens, %.1f tool calls%s\n",
		s.PerAsk.ModelCalls, s.PerAsk.InputTokens, s.PerAsk.OutputTokens, s.PerAsk.Steps, asks)
	if s.HarnessErrors > 0 {
		fmt.Fprintf(&b, "  harness errors       %d item(s) gave no outcome:\n", s.HarnessErrors)
		writeReasons(&b, r.Items, ItemResult.Unread, func(it ItemResult) string { return it.Detail })
	}
	// An error the item does not expect says what broke (a source down, a model refusing its
	// key): a target that fails every ask must not read as a model that scores 0%.
	failed := func(it ItemResult) bool { return it.Got == KindError && it.Expect != KindError && !it.Unread() }
	if n := len(slices.DeleteFunc(slices.Clone(r.Items), func(it ItemResult) bool { return !failed(it) })); n > 0 {
		fmt.Fprintf(&b, "  errors               %d item(s) ended in an error they do not expect:\n", n)
		writeReasons(&b, r.Items, failed, func(it ItemResult) string { return "error{" + it.ErrorKind + "}: " + it.Detail })
	}
	if s.Throttled > 0 {
		fmt.Fprintf(&b, "  throttled            %d ask(s) turned away with 429 and asked again (lower --concurrency?)\n", s.Throttled)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeReasons says why the items that match went wrong: each distinct reason once, the most
// frequent first, with how many items and which (the first few).
func writeReasons(b *strings.Builder, items []ItemResult, match func(ItemResult) bool, why func(ItemResult) string) {
	type reason struct {
		detail string
		ids    []string
	}
	var reasons []*reason
	byDetail := map[string]*reason{}
	for _, it := range items {
		if !match(it) {
			continue
		}
		d := why(it)
		r := byDetail[d]
		if r == nil {
			r = &reason{detail: d}
			byDetail[d] = r
			reasons = append(reasons, r)
		}
		r.ids = append(r.ids, it.ID)
	}
	slices.SortStableFunc(reasons, func(x, y *reason) int { return len(y.ids) - len(x.ids) })
	for _, r := range reasons {
		ids := r.ids
		more := ""
		if len(ids) > 3 {
			ids, more = ids[:3], ", …"
		}
		fmt.Fprintf(b, "    %d× %s (%s%s)\n", len(r.ids), r.detail, strings.Join(ids, ", "), more)
	}
}

// WriteMarkdown writes the report for people; chart is the chart image's file name beside it
// ("" for none).
func (r *Report) WriteMarkdown(w io.Writer, chart string) error {
	s := r.Scores
	var b strings.Builder
	fmt.Fprintf(&b, "# Eval report: %s\n\n", r.Set.Name)
	fmt.Fprintf(&b, "Generated by `make eval` (cmd/ask-eval). Do not edit by hand. What these scores do not judge "+
		"(an answer's prose, a definition's words, provenance as sent, phase 2's branches) is in docs/eval.md.\n\n")
	fmt.Fprintf(&b, "| | |\n|---|---|\n")
	fmt.Fprintf(&b, "| date | %s |\n| commit | `%s` |\n| model | %s |\n| target | %s |\n| set | %s (`%s`, %d items) |\n| concurrency | %d |\n| elapsed | %s |\n\n",
		r.Date.UTC().Format(time.RFC3339), r.Commit, r.Model, r.Target, r.Set.Name, r.Set.File, s.Items, r.Concurrency, msStr(&r.ElapsedMS))
	if r.Set.Description != "" {
		fmt.Fprintf(&b, "%s\n\n", strings.TrimSpace(r.Set.Description))
	}
	if chart != "" {
		fmt.Fprintf(&b, "![latency distribution and per-category scores](%s)\n\n", chart)
	}
	b.WriteString("## Scores\n\n| score | value |\n|---|---|\n")
	rows := [][2]string{
		{"outcome accuracy", pct(s.OutcomeAccuracy)},
		{"answer correctness (an item that did not answer is not correct)", pct(s.AnswerCorrectness)},
		{"answer correctness, when answered", pct(s.CorrectWhenAnswered)},
		{"attribution (provenance covers the expected terms)", pct(s.Attribution)},
		{"caveats carried", pct(s.CaveatsCarried)},
		{"abstention precision", pct(s.Abstention.Precision)},
		{"abstention recall", pct(s.Abstention.Recall)},
		{"refusal precision", pct(s.Refusal.Precision)},
		{"refusal recall", pct(s.Refusal.Recall)},
		{"harness errors (no outcome read)", fmt.Sprint(s.HarnessErrors)},
		{"asks turned away with 429 and asked again", fmt.Sprint(s.Throttled)},
	}
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s | %s |\n", row[0], row[1])
	}
	b.WriteString("\n## Outcomes (rows: expected, columns: got)\n\n| expected \\ got |")
	for _, k := range Kinds {
		fmt.Fprintf(&b, " %s |", k)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(Kinds)) + "\n")
	for _, e := range Kinds {
		fmt.Fprintf(&b, "| **%s** |", e)
		for _, g := range Kinds {
			fmt.Fprintf(&b, " %d |", s.Confusion[e][g])
		}
		b.WriteString("\n")
	}
	l := s.Latency
	b.WriteString("\n## Latency (from the ask's POST)\n\n| | n | p50 | p95 | max |\n|---|---|---|---|---|\n")
	for _, q := range []struct {
		name string
		q    Quantiles
	}{{"ticket", l.Ticket}, {"first milestone", l.FirstMilestone}, {"terminal event", l.Terminal}} {
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", q.name, q.q.N, msStr(q.q.P50), msStr(q.q.P95), msStr(q.q.Max))
	}
	fmt.Fprintf(&b, "\nPer ask (mean over %d asks that reached done): %.2f model calls, %.0f input tokens, %.0f output tokens, %.2f tool calls.\n",
		s.PerAsk.Asks, s.PerAsk.ModelCalls, s.PerAsk.InputTokens, s.PerAsk.OutputTokens, s.PerAsk.Steps)
	b.WriteString("\n## Per category\n\n| category | items | outcome accuracy | answer correctness |\n|---|---|---|---|\n")
	for _, c := range s.Categories {
		fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", c.Name, c.Items, pct(c.OutcomeAccuracy), pct(c.AnswerCorrectness))
	}
	b.WriteString("\n## Items\n\n| id | category | as | expected | got | correct | attributed | caveats | terminal | detail |\n|---|---|---|---|---|---|---|---|---|---|\n")
	mark := func(p *bool) string {
		switch {
		case p == nil:
			return ""
		case *p:
			return "✓"
		}
		return "✗"
	}
	for _, it := range r.Items {
		got := it.Got
		if !it.AsExpected() {
			got = "**" + got + "**"
		}
		term := "—"
		if it.TerminalMS >= 0 {
			term = msStr(&it.TerminalMS)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", it.ID, it.Category, it.As, it.Expect, got,
			mark(it.Correct), mark(it.Attributed), mark(it.CaveatsCarried), term, mdEscape(it.Detail))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// Diff writes how cur differs from base: each score side by side with its change, and the
// items whose outcome or correctness changed.
func Diff(w io.Writer, base, cur *Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "baseline %s (%s, model %s, commit %s)\n", base.Date.UTC().Format(time.RFC3339), base.Set.Name, base.Model, base.Commit)
	fmt.Fprintf(&b, "current  %s (%s, model %s, commit %s)\n", cur.Date.UTC().Format(time.RFC3339), cur.Set.Name, cur.Model, cur.Commit)
	if base.Set.Name != cur.Set.Name {
		fmt.Fprintf(&b, "note: the baseline ran set %s (%d items), this run set %s (%d items): the scores are over different questions\n",
			base.Set.Name, len(base.Items), cur.Set.Name, len(cur.Items))
	}
	bm := map[string]Metric{}
	for _, m := range base.Scores.Metrics() {
		bm[m.Name] = m
	}
	for _, m := range cur.Scores.Metrics() {
		o := bm[m.Name]
		fmt.Fprintf(&b, "  %-24s %10s → %-10s %s\n", m.Name, metricStr(o), metricStr(m), change(o, m))
	}
	old := map[string]ItemResult{}
	for _, it := range base.Items {
		old[it.ID] = it
	}
	var changed []string
	for _, it := range cur.Items {
		o, ok := old[it.ID]
		switch {
		case !ok:
			changed = append(changed, fmt.Sprintf("  %s: new item (%s)", it.ID, it.Got))
		case state(o) != state(it):
			changed = append(changed, fmt.Sprintf("  %s: %s → %s (expected %s)", it.ID, state(o), state(it), it.Expect))
		}
		delete(old, it.ID)
	}
	for _, it := range base.Items { // in the baseline's order, so the same reports diff alike
		if _, ok := old[it.ID]; ok {
			changed = append(changed, fmt.Sprintf("  %s: no longer in the set", it.ID))
		}
	}
	if len(changed) > 0 {
		fmt.Fprintf(&b, "items that changed:\n%s\n", strings.Join(changed, "\n"))
	} else {
		b.WriteString("no item changed its outcome, correctness, attribution or caveats\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// state is what the difference says of one item: its outcome, and where scored, whether it was
// correct, attributed and carried its caveats (a change in any of them is a change of the item).
// An outcome the harness could not read is not the error the service sent: an item that expects
// an error and had one, then had none read, scores otherwise and must be named.
func state(it ItemResult) string {
	s := it.Got
	if it.Unread() {
		s = "no outcome read"
	}
	s += mark(it.Correct)
	if it.Attributed != nil && !*it.Attributed {
		s += ", unattributed"
	}
	if it.CaveatsCarried != nil && !*it.CaveatsCarried {
		s += ", caveats missing"
	}
	return s
}

func mark(p *bool) string {
	switch {
	case p == nil:
		return ""
	case *p:
		return " (correct)"
	}
	return " (wrong)"
}

func metricStr(m Metric) string {
	switch {
	case m.Value == nil:
		return "—"
	case m.Percent:
		return fmt.Sprintf("%.1f%%", 100**m.Value)
	case strings.HasSuffix(m.Name, "_ms"):
		return fmt.Sprintf("%.0f ms", *m.Value)
	}
	return fmt.Sprintf("%.2f", *m.Value)
}

// shown is m's value as metricStr shows it (a percent in percent points), read back from the
// text: fmt rounds a half to even (0.0625 shows 6.2%), which math.Round would not.
func shown(m Metric) float64 {
	f, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSuffix(metricStr(m), " ms"), "%"), 64)
	return f
}

func change(o, m Metric) string {
	if o.Value == nil || m.Value == nil {
		return ""
	}
	// The change is between the figures as shown, so it adds up on the page (4 ms → 6 ms is
	// +2 ms, though the values were 4.4 and 5.6), and equal as shown is equal (2 ms → 2 ms is
	// not "-0 ms faster").
	d := shown(m) - shown(o)
	if math.Abs(d) < 1e-9 || metricStr(o) == metricStr(m) {
		return "="
	}
	var s string
	switch {
	case m.Percent:
		s = fmt.Sprintf("%+.1f pt", d)
	case strings.HasSuffix(m.Name, "_ms"):
		s = fmt.Sprintf("%+.0f ms", d)
	default:
		s = fmt.Sprintf("%+.2f", d)
	}
	switch {
	case m.HigherIsBetter && d > 0:
		s += " better"
	case m.HigherIsBetter:
		s += " worse"
	case strings.HasSuffix(m.Name, "_ms") && d > 0:
		s += " slower"
	case strings.HasSuffix(m.Name, "_ms"):
		s += " faster"
	case m.Name == "harness_errors" && d > 0: // items no outcome was read for
		s += " worse"
	case m.Name == "harness_errors":
		s += " better"
	}
	return s
}
