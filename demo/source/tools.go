package source

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/das-ask/ask/internal/clip"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Meta keys of the source tool contract (docs/sources.md).
const (
	// MetaPhase, on a tool: the milestone phase a call to it belongs to.
	MetaPhase = "ask/phase"
	// MetaRole, on a tool: what kind of tool it is, so the agent can read its results.
	MetaRole = "ask/role"
	// MetaCallID, on a call's params: the caller's id for the call, recorded in the audit line.
	MetaCallID = "ask/call_id"
	// MetaRefusal, on a result: {"code", "reason"} when the call was refused.
	MetaRefusal = "ask/refusal"
	// HeaderCallID carries the call id on the HTTP request as well.
	HeaderCallID = "Ask-Call-Id"
)

// MaxSQLBytes is the longest statement run_query runs; a longer one is a tool error. It also
// bounds the statement an audit line holds (maxAuditIDBytes bounds its call id), for an MCP
// request may carry 4 MiB and the source keeps DefaultAuditKeep lines in memory.
const MaxSQLBytes = 16 << 10

// maxAuditIDBytes is the most of a call id, or of an unknown tool's name, an audit line holds;
// the service's ids and the source's names are short.
const maxAuditIDBytes = 256

// Tool names.
const (
	ToolSearchCatalog = "search_catalog"
	ToolDefineTerm    = "define_term"
	ToolListTables    = "list_tables"
	ToolDescribeTable = "describe_table"
	ToolRunQuery      = "run_query"
)

// toolSpec is one tool: its MCP description and what it does.
type toolSpec struct {
	name, phase, role, description, schema string
	run                                    func(ctx context.Context, c *call, args json.RawMessage) outcome
}

func (s *Source) toolSpecs() []toolSpec {
	return []toolSpec{
		{
			name: ToolSearchCatalog, phase: "grounding", role: "catalog.search",
			description: "Search the business glossary for terms matching a query (a term, a synonym, or a few words). " +
				"Returns matching terms with a one-sentence summary; an empty list means the catalog does not define it.",
			schema: `{"type":"object","properties":{"query":{"type":"string","description":"Words to look up, e.g. \"change failure rate\"."}},"required":["query"],"additionalProperties":false}`,
			run:    s.searchCatalog,
		},
		{
			name: ToolDefineTerm, phase: "grounding", role: "catalog.define",
			description: "Define one glossary term: its definition, where the definition comes from, caveats to state with any answer, " +
				"and the tables that hold its data (none when the catalog alone answers).",
			schema: `{"type":"object","properties":{"term":{"type":"string","description":"The term or one of its synonyms, e.g. \"MTTR\"."}},"required":["term"],"additionalProperties":false}`,
			run:    s.defineTerm,
		},
		{
			name: ToolListTables, phase: "discovering", role: "schema.list",
			description: "List the database's tables with a one-line description of each.",
			schema:      `{"type":"object","properties":{},"additionalProperties":false}`,
			run:         s.listTables,
		},
		{
			name: ToolDescribeTable, phase: "discovering", role: "schema.describe",
			description: "Describe one table: its columns with their SQLite types and meanings.",
			schema:      `{"type":"object","properties":{"table":{"type":"string","description":"Table name from list_tables."}},"required":["table"],"additionalProperties":false}`,
			run:         s.describeTable,
		},
		{
			name: ToolRunQuery, phase: "querying", role: "query",
			description: "Run one read-only SQLite SELECT (or WITH … SELECT) statement and return its rows. " +
				"Writes, PRAGMA, ATTACH and multiple statements are refused; results are capped and time-limited. " +
				"Timestamps are ISO 8601 text (use julianday() for durations); quarters are 'YYYY-Qn' text.",
			schema: `{"type":"object","properties":{"sql":{"type":"string","description":"One SELECT statement."}},"required":["sql"],"additionalProperties":false}`,
			run:    s.runQuery,
		},
	}
}

// newServer builds the MCP server with every tool, each wrapped so that it is audited.
func (s *Source) newServer() *mcp.Server {
	name, title := "das-demo-source", "ask demo source"
	instructions := "Engineering reliability data (teams, services, incidents, deployments, on-call pay) with a business glossary. Look terms up in the catalog before querying."
	switch s.part {
	case PartCatalog:
		name, title = "das-demo-catalog", "ask demo catalog"
		instructions = "The business glossary of the engineering reliability data: what each term means, where the definition comes from, its caveats and the tables that hold it."
	case PartWarehouse:
		name, title = "das-demo-warehouse", "ask demo warehouse"
		instructions = "Engineering reliability data (teams, services, incidents, deployments, on-call pay): read-only SQL over its tables."
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: name, Title: title, Version: "1.0.0"}, &mcp.ServerOptions{
		Logger:       s.sdkLog(),
		Instructions: instructions,
	})
	served := map[string]bool{}
	for _, t := range s.toolSpecs() {
		catalogTool := t.role == "catalog.search" || t.role == "catalog.define"
		if (s.part == PartCatalog && !catalogTool) || (s.part == PartWarehouse && catalogTool) {
			continue
		}
		served[t.name] = true
		srv.AddTool(&mcp.Tool{
			Name:        t.name,
			Description: t.description,
			InputSchema: json.RawMessage(t.schema),
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)},
			Meta:        mcp.Meta{MetaPhase: t.phase, MetaRole: t.role},
		}, s.audited(t))
	}
	srv.AddReceivingMiddleware(s.auditUnknownTools(served))
	return srv
}

// auditUnknownTools audits a tools/call naming a tool not in served, which the SDK answers with
// a JSON-RPC error before any handler (and so audited) runs: a call is audited whatever its
// outcome, and a caller probing for tools leaves a trace.
func (s *Source) auditUnknownTools(served map[string]bool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil && !served[r.Params.Name] {
				who := caller(r)
				entry := AuditEntry{
					TS: s.now().UTC(), CallID: clip.Bytes(callID(r), maxAuditIDBytes), Tenant: who.tenant, OID: who.oid,
					Tool: clip.Bytes(r.Params.Name, maxAuditIDBytes), Status: StatusError,
				}
				entry.TraceID, entry.SpanID = callerTrace(r)
				if err := s.audit.record(entry); err != nil {
					s.log.Error("audit write failed", "tool", entry.Tool, "call_id", entry.CallID, "err", err)
					return nil, errors.New("internal error: the call could not be audited")
				}
				s.log.Info("tool call", "tool", entry.Tool, "call_id", entry.CallID, "tenant", entry.Tenant, "oid", entry.OID, "status", entry.Status,
					"code", "", "ms", 0, "trace_id", entry.TraceID)
			}
			return next(ctx, method, req)
		}
	}
}

// sdkLog is the logger handed to the MCP SDK: warnings and errors only.
func (s *Source) sdkLog() *slog.Logger {
	return slog.New(quieter{slog.LevelWarn, s.log.Handler()})
}

func (s *Source) searchCatalog(_ context.Context, _ *call, raw json.RawMessage) outcome {
	var args struct {
		Query string `json:"query"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return failed(err)
	}
	if strings.TrimSpace(args.Query) == "" {
		return failed(errors.New("query is required"))
	}
	return ok(s.catalog.search(args.Query))
}

func (s *Source) defineTerm(_ context.Context, _ *call, raw json.RawMessage) outcome {
	var args struct {
		Term string `json:"term"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return failed(err)
	}
	if strings.TrimSpace(args.Term) == "" {
		return failed(errors.New("term is required"))
	}
	d, found := s.catalog.define(args.Term)
	if !found {
		return failed(fmt.Errorf("the catalog has no term %q; search_catalog finds terms by synonym, and these are defined: %s",
			args.Term, strings.Join(s.catalog.names(), ", ")))
	}
	return ok(d)
}

func (s *Source) listTables(_ context.Context, _ *call, raw json.RawMessage) outcome {
	if err := decodeArgs(raw, &struct{}{}); err != nil {
		return failed(err)
	}
	type entry struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	out := struct {
		Tables []entry `json:"tables"`
	}{Tables: []entry{}}
	for _, t := range s.tables {
		out.Tables = append(out.Tables, entry{t.Name, t.Description})
	}
	return ok(out)
}

func (s *Source) describeTable(_ context.Context, _ *call, raw json.RawMessage) outcome {
	var args struct {
		Table string `json:"table"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return failed(err)
	}
	if strings.TrimSpace(args.Table) == "" {
		return failed(errors.New("table is required"))
	}
	var names []string
	for _, t := range s.tables {
		if strings.EqualFold(t.Name, strings.TrimSpace(args.Table)) {
			return ok(struct {
				Table   string   `json:"table"`
				Columns []Column `json:"columns"`
			}{t.Name, t.Columns})
		}
		names = append(names, t.Name)
	}
	return failed(fmt.Errorf("no table %q; the tables are: %s", args.Table, strings.Join(names, ", ")))
}

func (s *Source) runQuery(ctx context.Context, c *call, raw json.RawMessage) outcome {
	var args struct {
		SQL string `json:"sql"`
	}
	if err := decodeArgs(raw, &args); err != nil {
		return failed(err)
	}
	c.sql = args.SQL
	if len(args.SQL) > MaxSQLBytes {
		return failed(fmt.Errorf("the statement is %d bytes long; at most %d are run: send a shorter query", len(args.SQL), MaxSQLBytes))
	}
	res, err := s.querier.run(ctx, c.who, args.SQL)
	if err != nil {
		return failed(err)
	}
	c.rows = &res.RowCount
	return ok(res)
}

// decodeArgs reads a call's arguments into v, rejecting unknown fields so that a model's typo
// comes back as an error it can fix rather than being silently ignored.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %v", err)
	}
	return nil
}
