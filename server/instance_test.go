package server_test

import (
	"net/http"
	"testing"

	"github.com/das-ask/ask/server"
)

// TestProblemInstanceIsAURIReference: a 401's instance is the request's path as a URI
// reference (RFC 9457 §3.1.5), escaped as the request escaped it. It was the decoded path, so
// `/ask/v1/asks/%3Cx%3E` came back as `/ask/v1/asks/<x>`, no URI reference at all, and
// `/ask/v1/asks/a%2Fb` as `/ask/v1/asks/a/b`, the path of another resource. A percent-encoded
// unreserved character is the character (RFC 3986 §6.2.2.2), so `t%5Fx` is `t_x` either way.
func TestProblemInstanceIsAURIReference(t *testing.T) {
	h := newHarness(t, server.Options{})
	for _, tc := range []struct{ path, want string }{
		{"/ask/v1/asks/t_x", "/ask/v1/asks/t_x"},
		{"/ask/v1/asks/t%5Fx", "/ask/v1/asks/t_x"},
		{"/ask/v1/asks/%3Cx%3E", "/ask/v1/asks/%3Cx%3E"},
		{"/ask/v1/asks/a%2Fb", "/ask/v1/asks/a%2Fb"},
		{"/ask/v1/asks/a%20b/events", "/ask/v1/asks/a%20b/events"},
		{"/ask/v1/asks/%C3%A9", "/ask/v1/asks/%C3%A9"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://ask.test"+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp := h.do(req)
		p := problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), readBody(t, resp), http.StatusUnauthorized)
		got := "(none)"
		if p.Instance != nil {
			got = *p.Instance
		}
		if got != tc.want {
			t.Errorf("GET %s without a bearer: instance %q, want %q", tc.path, got, tc.want)
		}
	}
}
