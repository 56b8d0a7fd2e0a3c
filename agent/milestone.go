package agent

import (
	"regexp"
	"slices"
	"strings"

	"github.com/das-ask/ask/agent/source"
	"github.com/das-ask/ask/gen"
)

// maxSubject bounds a milestone's subject: it names a thing, it is not a sentence.
const maxSubject = 64

// milestone derives the milestone of one call from the tool's kind and the arguments the model
// gave it. It is emitted when the call starts, before the call's step: a milestone is what a
// person could be told now, so it cannot wait for the result. It must be called before the call
// is recorded in l, so that a query on a second source reads as reconciling.
func (l *ledger) milestone(t source.Tool, args map[string]any) gen.MilestoneBody {
	phase := t.Phase
	if t.Role == source.RoleQuery {
		q := l.queriedSources()
		if len(q) > 0 && !slices.Contains(q, t.Source) {
			phase = gen.MilestonePhaseReconciling
		}
	}
	subject := l.clean(subjectOf(t, args))
	if subject == "" {
		subject = l.clean(fallbackSubject(t))
	}
	return gen.MilestoneBody{Phase: phase, Subject: subject, Source: t.Source}
}

func subjectOf(t source.Tool, args map[string]any) string {
	switch t.Role {
	case source.RoleCatalogSearch:
		return firstString(args, "query", "q", "term")
	case source.RoleCatalogDefine:
		return firstString(args, "term", "name")
	case source.RoleSchemaList:
		return "tables"
	case source.RoleSchemaDescribe:
		return firstString(args, "table", "name")
	case source.RoleQuery:
		return strings.Join(tablesOf(firstString(args, "sql", "query")), ", ")
	}
	return t.Name
}

func fallbackSubject(t source.Tool) string {
	switch t.Role {
	case source.RoleCatalogSearch, source.RoleCatalogDefine:
		return "catalog"
	case source.RoleSchemaList, source.RoleSchemaDescribe:
		return "tables"
	case source.RoleQuery:
		return "query"
	}
	return t.Name
}

// clean keeps a subject short and never the question.
func (l *ledger) clean(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" || l.isQuestion(s) {
		return ""
	}
	if r := []rune(s); len(r) > maxSubject {
		s = strings.TrimSpace(string(r[:maxSubject]))
	}
	return s
}

var tableRef = regexp.MustCompile(`(?i)\b(?:from|join)\s+["\x60\[]?([A-Za-z_][A-Za-z0-9_.]*)`)

// tablesOf lists the tables a statement reads, in order of appearance, without duplicates.
func tablesOf(sql string) []string {
	var out []string
	for _, m := range tableRef.FindAllStringSubmatch(sql, -1) {
		name := strings.ToLower(m[1])
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}
