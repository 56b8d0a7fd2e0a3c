package webhooksink_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

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
		s.ServeHTTP(w, local(httptest.NewRequest(tc.method, tc.path, nil)))
		if got, allow := w.Code, w.Header().Get("Allow"); got != tc.status || allow != tc.allow {
			t.Errorf("%s %s: %d, Allow %q; want %d, Allow %q", tc.method, tc.path, got, allow, tc.status, tc.allow)
		}
	}
}

// local makes r come from loopback and name a loopback host, as a caller on the machine's does.
func local(r *http.Request) *http.Request {
	r.RemoteAddr, r.Host = "127.0.0.1:40000", "127.0.0.1:8080"
	return r
}

// TestListLoopbackOnly: the list holds every identity's outcomes, so it answers only a loopback
// peer naming a loopback host; another address, or a loopback request naming another host (a
// page that DNS rebinding brought to loopback), gets a 403 without them. It listed them to
// anyone who could reach the stack.
func TestListLoopbackOnly(t *testing.T) {
	secret := webhooktest.Secret()
	s, err := webhooksink.New(secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"ticket":"t_secretoutcome","terminal":{"type":"answer","text":"42"}}`
	now := time.Now()
	sig, err := wh.Sign("msg_1", now, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	post := httptest.NewRequest(http.MethodPost, "/ask/dev/webhooks/inbox", strings.NewReader(body))
	post.Header.Set(standardwebhooks.HeaderWebhookID, "msg_1")
	post.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	post.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, local(post))
	if w.Code != http.StatusNoContent {
		t.Fatalf("delivery: %d %s", w.Code, w.Body)
	}
	for _, tc := range []struct{ remote, host string }{
		{"192.0.2.7:40000", "127.0.0.1:8080"},
		{"127.0.0.1:40000", "rebind.example:8080"},
		{"[2001:db8::1]:40000", "localhost:8080"},
	} {
		for _, path := range []string{"/ask/dev/webhooks/", "/ask/dev/webhooks/?format=json"} {
			r := httptest.NewRequest(http.MethodGet, path, nil)
			r.RemoteAddr, r.Host = tc.remote, tc.host
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != http.StatusForbidden || strings.Contains(w.Body.String(), "t_secretoutcome") {
				t.Errorf("GET %s from %s naming %s: %d %s, want a 403 without the delivery", path, tc.remote, tc.host, w.Code, w.Body)
			}
		}
	}
	w = httptest.NewRecorder()
	s.ServeHTTP(w, local(httptest.NewRequest(http.MethodGet, "/ask/dev/webhooks/?format=json", nil)))
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "t_secretoutcome") {
		t.Errorf("GET from loopback: %d %s, want the delivery listed", w.Code, w.Body)
	}
}
