package webhooksink_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/das-ask/ask/demo/webhooksink"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// TestMethods: the list is read with GET or HEAD, deliveries come by POST to …/inbox, and any
// other request is a 405 whose Allow names what the path takes (RFC 9110 §15.5.6: a 405 must
// carry Allow). The sink answered every 405 without Allow, and a HEAD of the list with a 405.
func TestMethods(t *testing.T) {
	s, err := webhooksink.New(webhooktest.Secret(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/ask/dev/webhooks/", http.StatusOK, ""},
		{http.MethodHead, "/ask/dev/webhooks/", http.StatusOK, ""},
		{http.MethodHead, "/ask/dev/webhooks/inbox", http.StatusOK, ""},
		{http.MethodDelete, "/ask/dev/webhooks/", http.StatusMethodNotAllowed, "GET, HEAD"},
		{http.MethodPost, "/ask/dev/webhooks/", http.StatusMethodNotAllowed, "GET, HEAD"},
		{http.MethodPut, "/ask/dev/webhooks/inbox", http.StatusMethodNotAllowed, "GET, HEAD, POST"},
	} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		if got, allow := w.Code, w.Header().Get("Allow"); got != tc.status || allow != tc.allow {
			t.Errorf("%s %s: %d, Allow %q; want %d, Allow %q", tc.method, tc.path, got, allow, tc.status, tc.allow)
		}
	}
}
