package source

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestBearerSendsTraceContext: a request made under a span carries its W3C traceparent next to
// the bearer and the call id; one made outside any span carries none.
func TestBearerSendsTraceContext(t *testing.T) {
	var got http.Header
	b := &bearer{source: "demo", token: "tok", base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header.Clone()
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want string
	}{
		{"in a span", trace.ContextWithSpanContext(withCallID(t.Context(), "call_1"), sc), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"no span", withCallID(t.Context(), "call_1"), ""},
	} {
		req, _ := http.NewRequestWithContext(tc.ctx, http.MethodPost, "http://source.invalid/mcp", nil)
		resp, err := b.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if g := got.Get("traceparent"); g != tc.want {
			t.Errorf("%s: traceparent %q, want %q", tc.name, g, tc.want)
		}
		if got.Get("Authorization") != "Bearer tok" || got.Get(HeaderCallID) != "call_1" {
			t.Errorf("%s: bearer or call id lost: %v", tc.name, got)
		}
		if req.Header.Get("traceparent") != "" {
			t.Errorf("%s: the caller's request was modified", tc.name)
		}
	}
}
