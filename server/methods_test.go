package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/das-ask/ask/server"
)

// TestMethodNotAllowedSaysSo: a method a path has no operation for (GET on conversations, say,
// which a newcomer tries first) is a 405 whose detail says the method is the trouble and points
// at Allow; it said "the request does not satisfy the API description", as for a malformed body.
func TestMethodNotAllowedSaysSo(t *testing.T) {
	h := newHarness(t, server.Options{})
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodGet, "/ask/v1/conversations", "POST"},
		{http.MethodDelete, "/ask/v1/asks/t_x", "GET"},
	} {
		req, err := http.NewRequest(c.method, "http://ask.test"+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+alice)
		resp := h.do(req)
		p := problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), readBody(t, resp), http.StatusMethodNotAllowed)
		if p.Detail == nil || !strings.Contains(*p.Detail, "method") || !strings.Contains(*p.Detail, "Allow") {
			t.Errorf("%s %s: detail %v; want it to name the method as the trouble and point at Allow", c.method, c.path, p.Detail)
		}
		if !strings.Contains(resp.Header.Get("Allow"), c.allow) {
			t.Errorf("%s %s: Allow %q, want it to hold %s", c.method, c.path, resp.Header.Get("Allow"), c.allow)
		}
	}
}
