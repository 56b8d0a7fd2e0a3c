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

// milestone derives the milestone of one call from the tool's kind, its arguments and, for a
// successful call, what it returned. It must be called before the call is recorded in l, so
// that a query on a second source reads as reconciling.
func (l *ledger) milestone(t source.Tool, r source.Result) gen.MilestoneBody {
	phase := t.Phase
	if t.Role == source.RoleQuery {
		q := l.queriedSources()
		if len(q) > 0 && !slices.Contains(q, t.Source) {
			phase = gen.MilestonePhaseReconciling
		}
	}
	subject := l.clean(subjectOf(t, r))
	if subject == "" {
		subject = l.clean(fallbackSubject(t))
	}
	return gen.MilestoneBody{Phase: phase, Subject: subject, Source: t.Source}
}

func subjectOf(t source.Tool, r source.Result) string {
	switch t.Role {
	case source.RoleCatalogSearch:
		if r.Outcome == source.OK {
			var sr searchResult
			if decode(r.Data, &sr) == nil && len(sr.Terms) > 0 && sr.Terms[0].Term != "" {
				return sr.Terms[0].Term
			}
		}
		return firstString(r.Args, "query", "q", "term")
	case source.RoleCatalogDefine:
		if r.Outcome == source.OK {
			var d definition
			if decode(r.Data, &d) == nil && d.Term != "" {
				return d.Term
			}
		}
		return firstString(r.Args, "term", "name")
	case source.RoleSchemaList:
		return "tables"
	case source.RoleSchemaDescribe:
		return firstString(r.Args, "table", "name")
	case source.RoleQuery:
		return strings.Join(tablesOf(firstString(r.Args, "sql", "query")), ", ")
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
