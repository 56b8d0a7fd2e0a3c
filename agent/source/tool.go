package source

import (
	"strings"

	"github.com/das-ask/ask/gen"
)

// Role is what a tool does, in the source tool contract's words. The run loop assembles the
// answer from results by role, so roles decide what counts as a definition or a statement.
type Role string

const (
	RoleCatalogSearch  Role = "catalog.search"
	RoleCatalogDefine  Role = "catalog.define"
	RoleSchemaList     Role = "schema.list"
	RoleSchemaDescribe Role = "schema.describe"
	RoleQuery          Role = "query"
	// RoleOther is a tool whose role is neither declared nor recognisable by name. Its results
	// go to the model but never into the answer's facts.
	RoleOther Role = "other"
)

// Meta keys a source may set on a tool (mcp.Tool.Meta) to declare its phase and role.
const (
	MetaPhase = "ask/phase"
	MetaRole  = "ask/role"
)

// Tool is one tool a source offers.
type Tool struct {
	Source      string
	Name        string
	Description string
	InputSchema map[string]any
	Role        Role
	Phase       gen.MilestonePhase
}

// Classify returns a tool's role and phase. A tool's own `ask/role` and `ask/phase` metadata
// win. Without them the fallback mapping is, by tool name:
//
//	search_catalog, or a name containing "search"     → catalog.search   → grounding
//	define_term, or a name containing "define"        → catalog.define   → grounding
//	list_tables, or a name starting "list"            → schema.list      → discovering
//	describe_table, or a name starting "describe"     → schema.describe  → discovering
//	run_query, or a name containing "query" or "sql"  → query            → querying
//	anything else                                      → other            → discovering
//
// and an undeclared phase follows the role as above.
func Classify(name string, meta map[string]any) (Role, gen.MilestonePhase) {
	role := Role(metaString(meta, MetaRole))
	switch role {
	case RoleCatalogSearch, RoleCatalogDefine, RoleSchemaList, RoleSchemaDescribe, RoleQuery:
	default:
		role = roleByName(name)
	}
	phase := gen.MilestonePhase(metaString(meta, MetaPhase))
	switch phase {
	case gen.MilestonePhaseGrounding, gen.MilestonePhaseDiscovering, gen.MilestonePhaseQuerying, gen.MilestonePhaseReconciling:
	default:
		phase = phaseOf(role)
	}
	return role, phase
}

func roleByName(name string) Role {
	n := strings.ToLower(name)
	switch {
	case n == "search_catalog" || strings.Contains(n, "search"):
		return RoleCatalogSearch
	case n == "define_term" || strings.Contains(n, "define"):
		return RoleCatalogDefine
	case n == "list_tables" || strings.HasPrefix(n, "list"):
		return RoleSchemaList
	case n == "describe_table" || strings.HasPrefix(n, "describe"):
		return RoleSchemaDescribe
	case n == "run_query" || strings.Contains(n, "query") || strings.Contains(n, "sql"):
		return RoleQuery
	}
	return RoleOther
}

func phaseOf(r Role) gen.MilestonePhase {
	switch r {
	case RoleCatalogSearch, RoleCatalogDefine:
		return gen.MilestonePhaseGrounding
	case RoleQuery:
		return gen.MilestonePhaseQuerying
	default:
		return gen.MilestonePhaseDiscovering
	}
}

func metaString(meta map[string]any, key string) string {
	s, _ := meta[key].(string)
	return s
}
