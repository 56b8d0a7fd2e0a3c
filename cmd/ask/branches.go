package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/das-ask/ask/gen"
)

// branchView is how the CLI shows the branches of a phase-2 run: collapsed by default — one
// line as each branch opens, and only the supervisor's milestones — or, with --branches (or
// --steps), every branch's milestones too, each marked with its branch.
type branchView struct {
	expand bool
	label  map[string]string // branch id → what the branch works on
}

// supervisorRole is the role of the branch every run has; its milestones are always shown.
const supervisorRole = "supervisor"

// open returns the line to show when a branch opens, or "".
func (b *branchView) open(v gen.BranchEvent) string {
	if v.Role == supervisorRole || v.State != gen.BranchEventStateOpen {
		return ""
	}
	if b.label == nil {
		b.label = map[string]string{}
	}
	switch {
	case v.Role == "withheld":
		b.label[v.BranchId] = "without the catalog"
		return "Also answering without the catalog, to compare…"
	case v.Source != nil && *v.Source != "":
		b.label[v.BranchId] = *v.Source
		return fmt.Sprintf("Asking %s…", *v.Source)
	}
	b.label[v.BranchId] = v.BranchId
	return fmt.Sprintf("Working on %s…", v.BranchId)
}

// milestone returns the line for a milestone, and whether to show it: the supervisor's (or a
// phase-1 run's, which names no branch) always; a branch's only when expanded.
func (b *branchView) milestone(m gen.MilestoneEvent) (string, bool) {
	line := milestoneSentence(m)
	if m.BranchId == nil {
		return line, true
	}
	label, inBranch := b.label[*m.BranchId]
	if !inBranch {
		return line, true // the supervisor's
	}
	if !b.expand {
		return "", false
	}
	return fmt.Sprintf("  [%s] %s", label, line), true
}

// step prefixes a tool call's line with its branch, when it was made in one.
func (b *branchView) step(s gen.StepEvent) string {
	line := stepLine(s)
	if s.BranchId != nil {
		if label, ok := b.label[*s.BranchId]; ok {
			return fmt.Sprintf("  [%s]%s", label, strings.TrimPrefix(line, " "))
		}
	}
	return line
}

// divergenceSentence says what the answer would have been without the catalog.
func divergenceSentence(d *gen.Divergence) string {
	terms := strings.Join(d.Without, ", ")
	def := "definition"
	if len(d.Without) > 1 {
		def = "definitions"
	}
	what := "a different result"
	switch {
	case d.Headline != nil:
		what = fmt.Sprintf("%s: %s", d.Headline.Label, cell(d.Headline.Value))
	case len(d.Result.Rows) == 1 && len(d.Result.Rows[0]) == len(d.Result.Columns):
		parts := make([]string, len(d.Result.Columns))
		for i, c := range d.Result.Columns {
			parts[i] = fmt.Sprintf("%s %s", c, cell(d.Result.Rows[0][i]))
		}
		what = strings.Join(parts, ", ")
	}
	return fmt.Sprintf("Without the catalog's %s of %s, the answer would have been %s.", def, terms, what)
}

// renderDivergence prints the divergence sentence, and the other result's table when it has more
// than one row.
func renderDivergence(w io.Writer, d *gen.Divergence, steps bool) {
	fmt.Fprintln(w, "\n"+divergenceSentence(d))
	if d.Headline == nil && len(d.Result.Rows) > 1 {
		renderTable(w, &d.Result)
	}
	if steps && len(d.Sql) > 0 {
		fmt.Fprintln(w, "  SQL without the catalog:")
		for _, q := range d.Sql {
			fmt.Fprintf(w, "  %s\n", q)
		}
	}
}
