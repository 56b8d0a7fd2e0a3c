package conformance

import (
	"net/http"
	"slices"
	"testing"

	"github.com/das-ask/ask/webhook/webhooktest"
)

// A delivery carries no credential in any header or its body: the caller's bearer (whole, or
// its signature) anywhere, or a cookie, is found and named; a clean delivery has nothing found.
func TestCredentialsInDelivery(t *testing.T) {
	const tok = "eyJhbGciOiJSUzI1NiJ9.eyJvaWQiOiJhIn0.c2lnbmF0dXJlLW9mLXRoZS1iZWFyZXI"
	marks := bearerMarks(tok)
	clean := http.Header{"Webhook-Id": {"msg_1"}, "Content-Type": {"application/json"}}
	for _, tc := range []struct {
		name   string
		header http.Header
		body   string
		want   []string
	}{
		{"clean", clean, `{"type":"ask.ended"}`, nil},
		{"bearer in another header", http.Header{"X-Caller": {"Bearer " + tok}}, `{}`, []string{"the delivery's X-Caller header carried a caller's bearer"}},
		{"the bearer's signature alone", http.Header{"x-sig": {"c2lnbmF0dXJlLW9mLXRoZS1iZWFyZXI"}}, `{}`, []string{"the delivery's X-Sig header carried a caller's bearer"}},
		{"bearer in the body", clean, `{"token":"` + tok + `"}`, []string{"the delivery's body carried a caller's bearer"}},
		{"a cookie", http.Header{"Cookie": {"s=1"}}, `{}`, []string{"the delivery carried a Cookie header"}},
		{"Authorization is checked apart", http.Header{"Authorization": {"Bearer " + tok}}, `{}`, nil},
	} {
		got := credentialsIn(webhooktest.Delivery{Header: tc.header, Body: []byte(tc.body)}, marks)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: found %q, want %q", tc.name, got, tc.want)
		}
	}
}
