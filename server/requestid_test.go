package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/das-ask/ask/server"
)

// Every response carries X-Request-Id and X-Content-Type-Options: nosniff with the service
// served bare (no obs in front): an answer, a problem (401, 404, 400), an unknown route, the
// schema. A well-formed id
// from the caller is echoed; a malformed one, or one given twice, is replaced.
func TestEveryResponseHasARequestID(t *testing.T) {
	srv, err := server.New(server.Options{Authenticator: fakeAuth{}, Runner: answerRunner(1)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(t.Context())
	h := srv.Handler()
	do := func(method, path, token, body, id string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if id != "" {
			req.Header.Set("X-Request-Id", id)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	conv := do(http.MethodPost, "/ask/v1/conversations", alice, `{}`, "")
	if conv.Code != http.StatusCreated {
		t.Fatalf("create conversation: %d", conv.Code)
	}
	for _, tc := range []struct {
		name string
		w    *httptest.ResponseRecorder
	}{
		{"201", conv},
		{"401", do(http.MethodPost, "/ask/v1/conversations", "", `{}`, "")},
		{"404 ticket", do(http.MethodGet, "/ask/v1/asks/t_NOSUCHTICKETNOSUCHTICKET00", alice, "", "")},
		{"404 route", do(http.MethodGet, "/nowhere", "", "", "")},
		{"400", do(http.MethodPost, "/ask/v1/conversations", alice, `{"x":`, "")},
		{"schema", do(http.MethodGet, "/ask/v1/openapi.yaml", "", "", "")},
	} {
		if id := tc.w.Header().Get("X-Request-Id"); len(id) != 26 {
			t.Errorf("%s (HTTP %d): X-Request-Id %q, want a fresh id", tc.name, tc.w.Code, id)
		}
		if v := tc.w.Header().Values("X-Content-Type-Options"); len(v) != 1 || v[0] != "nosniff" {
			t.Errorf("%s (HTTP %d): X-Content-Type-Options %q, want nosniff", tc.name, tc.w.Code, v)
		}
	}
	if id := do(http.MethodGet, "/nowhere", "", "", "gw-42").Header().Get("X-Request-Id"); id != "gw-42" {
		t.Errorf("a well-formed id was not echoed: %q", id)
	}
	if id := do(http.MethodGet, "/nowhere", "", "", "a b\tc").Header().Get("X-Request-Id"); id == "a b\tc" || len(id) != 26 {
		t.Errorf("a malformed id was not replaced: %q", id)
	}
	two := httptest.NewRequest(http.MethodGet, "/nowhere", nil)
	two.Header.Add("X-Request-Id", "gw-42")
	two.Header.Add("X-Request-Id", "gw-43")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, two)
	if id := w.Header().Values("X-Request-Id"); len(id) != 1 || len(id[0]) != 26 {
		t.Errorf("an id given twice: X-Request-Id %q, want one fresh id", id)
	}
}
