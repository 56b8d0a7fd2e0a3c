package obs

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRouteOf(t *testing.T) {
	for _, tc := range []struct{ method, path, want string }{
		{"POST", "/ask/v1/conversations", routeCreateConversation},
		{"POST", "/v1/conversations", routeCreateConversation},
		{"POST", "/ask/v1/conversations/c_1/asks", routeCreateAsk},
		{"GET", "/ask/v1/asks/t_1/events", routeStream},
		{"GET", "/ask/v1/asks/t_1", routeGetAsk},
		{"POST", "/ask/v1/asks/t_1/cancel", routeCancel},
		{"GET", "/ask/v1/openapi.json", routeSpec},
		{"GET", "/ask/v1/conversations", routeOther},
		{"GET", "/ask/ui/", routeOther},
		{"GET", "/ask/v1/asks/t_1/events/extra", routeOther},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		if got := routeOf(r); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestRefusalReason(t *testing.T) {
	for status, want := range map[int]string{
		http.StatusCreated: "", http.StatusAccepted: "", http.StatusBadRequest: "bad_request",
		http.StatusUnauthorized: "unauthorized", http.StatusNotFound: "not_found", http.StatusConflict: "conflict",
		http.StatusRequestEntityTooLarge: "too_large", http.StatusTooManyRequests: "too_many_in_flight",
		http.StatusServiceUnavailable: "unavailable", http.StatusInternalServerError: "other",
	} {
		if got := refusalReason(status); got != want {
			t.Errorf("%d: %q, want %q", status, got, want)
		}
	}
}
