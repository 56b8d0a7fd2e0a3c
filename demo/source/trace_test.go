package source_test

import (
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/das-ask/ask/demo/source"
)

// traceparent sends a fixed W3C traceparent header on every request, as the ask agent's
// transport does with the trace context of the tool call's span.
type traceparent struct {
	value string
	next  http.RoundTripper
}

func (t traceparent) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", t.value)
	return t.next.RoundTrip(r)
}

func TestAuditRecordsCallersTrace(t *testing.T) {
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	for _, tc := range []struct {
		name, header        string
		wantTrace, wantSpan string
	}{
		{"valid", "00-" + traceID + "-" + spanID + "-01", traceID, spanID},
		{"malformed", "00-not-a-trace-01", "", ""},
		{"absent", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := start(t, source.Options{})
			var rt http.RoundTripper = headers{token: "tok-alice", next: srv.Client().Transport}
			if tc.header != "" {
				rt = traceparent{value: tc.header, next: rt}
			}
			client := mcp.NewClient(&mcp.Implementation{Name: "source-test", Version: "0"}, nil)
			cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{
				Endpoint: srv.URL + "/mcp", HTTPClient: &http.Client{Transport: rt},
				DisableStandaloneSSE: true, MaxRetries: -1,
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			call(t, cs, "c-trace", "list_tables", map[string]any{})
			got := auditEntries(t, srv, "call_id=c-trace")
			if len(got) != 1 {
				t.Fatalf("audit lines for c-trace: %d, want 1", len(got))
			}
			if got[0].TraceID != tc.wantTrace || got[0].SpanID != tc.wantSpan {
				t.Errorf("audit trace_id, span_id = %q, %q; want %q, %q", got[0].TraceID, got[0].SpanID, tc.wantTrace, tc.wantSpan)
			}
		})
	}
}
