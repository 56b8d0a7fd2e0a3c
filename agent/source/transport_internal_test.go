package source

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
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
	u, _ := url.Parse("http://source.invalid/mcp")
	b := &bearer{source: "demo", token: "tok", origin: originOf(u), base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
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

// The bearer goes to the configured origin only: a request for any other scheme, host or port
// is refused before anything is sent, whoever made its URL; the default port is the same
// origin as the port left out.
func TestBearerOnlyToItsOrigin(t *testing.T) {
	u, _ := url.Parse("http://Source.example:80/mcp")
	sent := 0
	b := &bearer{source: "demo", token: "tok", origin: originOf(u), base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent++
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("")), Request: r}, nil
	})}
	for _, tc := range []struct {
		url  string
		sent bool
	}{
		{"http://source.example/mcp", true},
		{"http://SOURCE.example:80/other", true},
		{"https://source.example/mcp", false},
		{"http://source.example:8080/mcp", false},
		{"http://other.example/mcp", false},
		{"http://source.example.evil/mcp", false},
	} {
		sent = 0
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, tc.url, nil)
		resp, err := b.RoundTrip(req)
		if tc.sent {
			if err != nil || sent != 1 {
				t.Errorf("%s: err %v, sent %d; want it sent", tc.url, err, sent)
				continue
			}
			resp.Body.Close()
			continue
		}
		if !errors.Is(err, ErrOffOrigin) || sent != 0 {
			t.Errorf("%s: err %v, sent %d; want ErrOffOrigin and nothing sent", tc.url, err, sent)
		}
	}
	if !errors.Is(b.Fault(), ErrOffOrigin) {
		t.Errorf("fault = %v, want ErrOffOrigin kept for the run's message", b.Fault())
	}
}
