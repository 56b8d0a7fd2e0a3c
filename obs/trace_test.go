package obs_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/das-ask/ask/demo/source"
)

// TestTraceparentReachesTheSource shows that a tool call can be followed from the ask's trace
// into the source: every audit line the ask left names the ask's trace and the span of its
// tool call, and the ask's span is the parent of every model call and tool call.
func TestTraceparentReachesTheSource(t *testing.T) {
	s := startStack(t)
	alice := s.idp.Token(t, "alice")
	// The caller's own trace: the ask joins it.
	const clientTrace = "0af7651916cd43dd8448eb211c80319c"
	conv := s.conversation(t, alice)
	resp, b := s.do(t, http.MethodPost, "/v1/conversations/"+conv+"/asks", alice, map[string]any{"question": qAnswer},
		http.Header{"Traceparent": {"00-" + clientTrace + "-b7ad6b7169203331-01"}, "X-Request-Id": {"req-trace-1"}})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("create ask: %d %s", resp.StatusCode, b)
	}
	if got := resp.Header.Get("X-Request-Id"); got != "req-trace-1" {
		t.Errorf("X-Request-Id echoed as %q", got)
	}
	var tk struct{ Ticket string }
	json.Unmarshal(b, &tk)
	if got := s.events(t, alice, tk.Ticket, ""); !slices.Contains(got, "answer") {
		t.Fatalf("events %v", got)
	}
	s.shutdown(t)

	spans := s.spans.GetSpans()
	var askSpan *tracetest.SpanStub
	for i := range spans {
		if spans[i].Name == "ask" && hasAttr(spans[i].Attributes, "ask.ticket", tk.Ticket) {
			askSpan = &spans[i]
		}
	}
	if askSpan == nil {
		t.Fatalf("no ask span for %s among %d spans", tk.Ticket, len(spans))
	}
	traceID := askSpan.SpanContext.TraceID()
	if traceID.String() != clientTrace {
		t.Errorf("ask trace %s, want the caller's %s", traceID, clientTrace)
	}
	if !hasAttr(askSpan.Attributes, "ask.outcome", "answer") || !hasAttr(askSpan.Attributes, "ask.request_id", "req-trace-1") {
		t.Errorf("ask span attributes %v: want outcome answer and the request id", askSpan.Attributes)
	}
	toolSpans := map[string]bool{}
	models := 0
	for _, sp := range spans {
		if sp.SpanContext.TraceID() != traceID {
			continue
		}
		switch sp.Name {
		case "ask.tool_call":
			toolSpans[sp.SpanContext.SpanID().String()] = true
		case "ask.model_call":
			models++
		default:
			continue
		}
		if sp.Parent.SpanID() != askSpan.SpanContext.SpanID() {
			t.Errorf("%s span's parent is %s, want the ask's %s", sp.Name, sp.Parent.SpanID(), askSpan.SpanContext.SpanID())
		}
	}
	if len(toolSpans) != 4 || models != 5 {
		t.Errorf("%d tool call spans and %d model call spans, want 4 and 5", len(toolSpans), models)
	}

	// The source's audit: every line of this ask carries its trace and the tool call's span.
	audit := auditOf(t, s, "alice")
	if len(audit) != 4 {
		t.Fatalf("%d audit lines for alice, want 4", len(audit))
	}
	for _, e := range audit {
		if e.TraceID != traceID.String() || !toolSpans[e.SpanID] {
			t.Errorf("audit line %s (%s): trace %q span %q, want trace %s and one of the ask's tool call spans", e.CallID, e.Tool, e.TraceID, e.SpanID, traceID)
		}
	}
	// No span attribute holds the question or the token.
	for _, sp := range spans {
		for _, kv := range sp.Attributes {
			if v := kv.Value.String(); strings.Contains(v, qAnswer) || strings.Contains(v, alice) || v == "alice" {
				t.Errorf("span %s attribute %s = %q", sp.Name, kv.Key, v)
			}
		}
	}
}

func hasAttr(attrs []attribute.KeyValue, key, want string) bool {
	for _, kv := range attrs {
		if string(kv.Key) == key {
			return kv.Value.String() == want
		}
	}
	return false
}

// auditOf reads the demo source's audit lines for oid.
func auditOf(t *testing.T, s *stack, oid string) []source.AuditEntry {
	t.Helper()
	resp, err := s.client.Get(s.source.URL + "/audit?oid=" + oid)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []source.AuditEntry
	for line := range strings.Lines(string(b)) {
		var e source.AuditEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}
