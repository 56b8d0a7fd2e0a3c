package source

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/das-ask/ask/internal/clip"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// call is what the audit line needs to know about one tool call, filled in as it runs.
type call struct {
	id   string
	who  identity
	sql  string
	rows *int
}

// outcome is how a tool call ended: a structured result, a refusal, or a tool error.
type outcome struct {
	result  any
	refusal *refusalError
	err     error
}

func ok(v any) outcome { return outcome{result: v} }

// failed classifies err: a *refusalError is a refusal, anything else a tool error for the model.
func failed(err error) outcome {
	var r *refusalError
	if errors.As(err, &r) {
		return outcome{refusal: r}
	}
	return outcome{err: err}
}

// audited wraps a tool so that every call — answered, failed or refused — leaves exactly one
// audit line with the caller's call id and identity, written before the result is returned.
func (s *Source) audited(t toolSpec) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		c := &call{id: callID(req), who: caller(req)}
		out := t.run(ctx, c, req.Params.Arguments)
		entry := AuditEntry{
			TS: s.now().UTC(), CallID: clip.Bytes(c.id, maxAuditIDBytes), Tenant: c.who.tenant, OID: c.who.oid, Tool: t.name,
			MS: time.Since(start).Milliseconds(), Status: StatusOK, SQL: clip.Bytes(c.sql, MaxSQLBytes), Rows: c.rows,
		}
		entry.TraceID, entry.SpanID = callerTrace(req)
		switch {
		case out.refusal != nil:
			entry.Status, entry.Refused, entry.Code = StatusRefused, true, out.refusal.Code
		case out.err != nil:
			entry.Status = StatusError
		}
		if err := s.audit.record(entry); err != nil {
			// An unauditable call must not succeed silently: report it and fail the call.
			s.log.Error("audit write failed", "tool", t.name, "call_id", entry.CallID, "err", err)
			return errorResult("internal error: the call could not be audited"), nil
		}
		s.log.Info("tool call", "tool", t.name, "call_id", entry.CallID, "tenant", c.who.tenant, "oid", c.who.oid, "status", entry.Status, "code", entry.Code, "ms", entry.MS,
			"trace_id", entry.TraceID)
		return out.toResult(), nil
	}
}

// callID is the caller's id for the call: `ask/call_id` in the params' _meta, else the
// Ask-Call-Id header of the HTTP request that carried it.
func callID(req *mcp.CallToolRequest) string {
	if id, ok := req.Params.GetMeta()[MetaCallID].(string); ok && id != "" {
		return id
	}
	if req.Extra != nil && req.Extra.Header != nil {
		return req.Extra.Header.Get(HeaderCallID)
	}
	return ""
}

// callerTrace is the trace and span id of the caller's W3C traceparent header, or "" for both
// when it sent none or a malformed one.
func callerTrace(req *mcp.CallToolRequest) (traceID, spanID string) {
	if req.Extra == nil || req.Extra.Header == nil {
		return "", ""
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(req.Extra.Header))
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	return sc.TraceID().String(), sc.SpanID().String()
}

// caller is the validated identity the HTTP guard attached to the request (mcpHandler). A
// request without one cannot reach a tool; an empty identity would get the most restricted
// profile anyway.
func caller(req *mcp.CallToolRequest) identity {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return identity{}
	}
	tenant, _ := req.Extra.TokenInfo.Extra[extraTenant].(string)
	oid, _ := req.Extra.TokenInfo.Extra[extraOID].(string)
	return identity{tenant: tenant, oid: oid}
}

// toResult renders the outcome as the contract says: a result as StructuredContent plus the same
// JSON as one TextContent; a refusal as IsError with `ask/refusal` meta; a tool error as IsError
// with the message.
func (o outcome) toResult() *mcp.CallToolResult {
	switch {
	case o.refusal != nil:
		return &mcp.CallToolResult{
			IsError: true,
			Meta:    mcp.Meta{MetaRefusal: map[string]any{"code": o.refusal.Code, "reason": o.refusal.Reason}},
			Content: []mcp.Content{&mcp.TextContent{Text: "Refused (" + o.refusal.Code + "): " + o.refusal.Reason}},
		}
	case o.err != nil:
		return errorResult(o.err.Error())
	}
	b, err := json.Marshal(o.result)
	if err != nil {
		return errorResult("internal error: result could not be encoded")
	}
	return &mcp.CallToolResult{
		StructuredContent: json.RawMessage(b),
		Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
	}
}

func errorResult(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}
