package requestid_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/das-ask/ask/internal/requestid"
)

func TestHandler(t *testing.T) {
	h := requestid.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	for _, tc := range []struct {
		name, given, outer string
		want               func(string) bool
	}{
		{"none given: a fresh one", "", "", func(s string) bool { return len(s) == 26 }},
		{"well-formed: echoed", "req-1.a:b_c", "", func(s string) bool { return s == "req-1.a:b_c" }},
		{"forged line: replaced", "x\r\nlevel=ERROR", "", func(s string) bool { return len(s) == 26 && !strings.Contains(s, "level") }},
		{"too long: replaced", strings.Repeat("a", 129), "", func(s string) bool { return len(s) == 26 }},
		{"an outer layer's wins", "mine", "outer-id", func(s string) bool { return s == "outer-id" }},
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if tc.given != "" {
			req.Header[requestid.Header] = []string{tc.given}
		}
		w := httptest.NewRecorder()
		if tc.outer != "" {
			w.Header().Set(requestid.Header, tc.outer)
		}
		h.ServeHTTP(w, req)
		if got := w.Header().Values(requestid.Header); len(got) != 1 || !tc.want(got[0]) {
			t.Errorf("%s: X-Request-Id = %q", tc.name, got)
		}
	}
}

// A request id given twice is neither: which of the two would the caller look for in the logs?
func TestHandlerTwoIDs(t *testing.T) {
	h := requestid.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Add(requestid.Header, "first-id")
	req.Header.Add(requestid.Header, "second-id")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if got := w.Header().Values(requestid.Header); len(got) != 1 || len(got[0]) != 26 {
		t.Errorf("X-Request-Id = %q, want one fresh id", got)
	}
}
