package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/gen"
)

// milestoneSentence is this client's wording of a milestone: the service sends structure, the
// sentence is ours. When the service can name no term or table (the model searched with the
// question itself, which no milestone repeats; a statement naming no table), the subject is the
// kind of thing instead — catalog, tables, query — and is said as no subject: "Looking up
// 'catalog' in the catalog…" and "Running a query on query…" read as nonsense.
func milestoneSentence(m gen.MilestoneEvent) string {
	subject := strings.TrimSpace(m.Subject)
	switch m.Phase {
	case gen.MilestonePhaseGrounding:
		if subject == "" || subject == "catalog" {
			return "Looking in the catalog…"
		}
		return fmt.Sprintf("Looking up '%s' in the catalog…", subject)
	case gen.MilestonePhaseDiscovering:
		switch {
		case subject == "" || subject == "tables":
			return "Looking at which tables there are…"
		case strings.Contains(subject, ","):
			return fmt.Sprintf("Reading the %s tables…", subject)
		}
		return fmt.Sprintf("Reading the %s table…", subject)
	case gen.MilestonePhaseQuerying:
		if subject == "" || subject == "query" {
			return "Running a query…"
		}
		return fmt.Sprintf("Running a query on %s…", subject)
	case gen.MilestonePhaseReconciling:
		return "Combining sources…"
	}
	if subject == "" {
		return "Working…"
	}
	return fmt.Sprintf("Working on %s…", subject)
}

// stepLine describes one tool call, for --steps.
func stepLine(s gen.StepEvent) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  · %s on %s", s.Tool, s.Source)
	if len(s.Args) > 0 {
		keys := make([]string, 0, len(s.Args))
		for k := range s.Args {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			v, _ := json.Marshal(s.Args[k])
			parts = append(parts, k+"="+string(v))
		}
		fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintf(&b, " — %d ms", s.Ms)
	switch {
	case s.Refused:
		b.WriteString(", refused")
	case s.Error != nil && *s.Error != "":
		b.WriteString(", tool error: " + *s.Error)
	}
	return b.String()
}

// renderAnswer prints an answer: its text, its result, its caveats (always), what it rests on,
// and with steps the SQL and the path.
func renderAnswer(w io.Writer, a *gen.AnswerEvent, steps bool) {
	fmt.Fprintln(w, strings.TrimSpace(a.Text))
	switch {
	case a.Headline != nil:
		fmt.Fprintf(w, "\n%s: %v\n", a.Headline.Label, cell(a.Headline.Value))
	case a.Result != nil && len(a.Result.Columns) > 0:
		fmt.Fprintln(w)
		renderTable(w, a.Result)
	}
	fmt.Fprintln(w)
	if len(a.Caveats) == 0 {
		fmt.Fprintln(w, "Caveats: none raised by the catalog.")
	} else {
		fmt.Fprintln(w, "Caveats:")
		for _, c := range a.Caveats {
			fmt.Fprintf(w, "  - %s: %s (%s)\n", c.Term, c.Text, c.Source)
		}
	}
	if len(a.Provenance) > 0 {
		fmt.Fprintln(w, "\nBased on:")
		for _, p := range a.Provenance {
			fmt.Fprintf(w, "  - %s: %s (%s, %s)\n", p.Term, p.Statement, p.Source, p.Kind)
		}
	}
	if a.Divergence != nil {
		renderDivergence(w, a.Divergence, steps)
	}
	if steps {
		if len(a.Sql) > 0 {
			fmt.Fprintln(w, "\nSQL:")
			for _, q := range a.Sql {
				fmt.Fprintf(w, "  %s\n", q)
			}
		}
		fmt.Fprintf(w, "\nPath: %s (%s)\n", a.Path.Speed, a.Path.Detail)
	}
}

// renderTable prints a result set as aligned columns.
func renderTable(w io.Writer, r *gen.ResultSet) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	cols := make([]string, len(r.Columns))
	for i, c := range r.Columns {
		cols[i] = oneLine(c)
	}
	fmt.Fprintln(tw, "  "+strings.Join(cols, "\t"))
	rules := make([]string, len(r.Columns))
	for i, c := range cols {
		rules[i] = strings.Repeat("-", max(len(c), 3))
	}
	fmt.Fprintln(tw, "  "+strings.Join(rules, "\t"))
	for _, row := range r.Rows {
		cells := make([]string, len(row))
		for i, v := range row {
			cells[i] = cell(v)
		}
		fmt.Fprintln(tw, "  "+strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
	if r.Truncated {
		fmt.Fprintf(w, "  (the source capped the rows at %d)\n", len(r.Rows))
	}
}

// cell renders one value as the source sent it; JSON numbers without a spurious exponent.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "—"
	case string:
		return oneLine(x)
	case float64:
		if x == float64(int64(x)) {
			return fmt.Sprintf("%d", int64(x))
		}
		return fmt.Sprintf("%g", x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// renderAbstention says there is no answer and exactly what was tried — never like an answer,
// and never claiming a lookup that did not happen — then the model's own words, if it said any
// (a clarifying question the person can answer with --continue).
func renderAbstention(w io.Writer, a *gen.AbstentionEvent) {
	var sources []string
	if a.Sources != nil {
		sources = *a.Sources
	}
	switch {
	case len(sources) == 0 && len(a.Terms) == 0:
		fmt.Fprintln(w, "No answer: nothing was looked up (the agent called no tool).")
	case len(a.Terms) == 0:
		fmt.Fprintln(w, "No answer: nothing the agent found answers this.")
	default:
		fmt.Fprintf(w, "No answer: the catalog has nothing for: %s\n", strings.Join(a.Terms, ", "))
	}
	if len(sources) > 0 {
		fmt.Fprintf(w, "Looked in: %s\n", strings.Join(sources, ", "))
	}
	if a.Text != nil && strings.TrimSpace(*a.Text) != "" {
		said := strings.TrimSpace(*a.Text)
		fmt.Fprintf(w, "\nThe agent said: %s\n", said)
		if strings.HasSuffix(said, "?") { // it asked something back
			fmt.Fprintln(w, "(To reply, ask again with --continue.)")
		}
	}
}

// renderRefusal says who refused and why — a permissions decision, not an empty result.
func renderRefusal(w io.Writer, r *gen.RefusalEvent) {
	fmt.Fprintf(w, "Refused by %s (%s): %s\n", r.Source, r.Tool, r.Reason)
	fmt.Fprintln(w, "This is the source's decision about your access, not an empty result.")
}

// errorSentence describes a failed run for stderr.
func errorSentence(e *gen.ErrorEvent) string {
	switch e.Kind {
	case gen.ErrorKindCancelled:
		return "Cancelled."
	case gen.ErrorKindTimeout:
		return "The run took too long and was stopped: " + e.Message
	}
	return fmt.Sprintf("The run failed (%s): %s", e.Kind, e.Message)
}

// exitCode maps an outcome to the command's exit status.
func exitCode(k client.OutcomeKind) int {
	switch k {
	case client.Answer:
		return exitAnswer
	case client.Abstention:
		return exitAbstention
	case client.Refusal:
		return exitRefusal
	}
	return exitError
}
