package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/das-ask/ask/server"
)

// TestEscapedUnreservedIsThePlainPath: a path that percent-encodes an unreserved character
// names the same resource as the plain one (RFC 3986 §6.2.2.2), so an id written `t%5F…` is
// the ticket `t_…` and `/ask/%761/…` the `/ask/v1/…` route. Before, Echo handed the contract's
// validator the escaped id, whose `%` the id pattern refuses (a 400 for a request the
// document accepts), and routed on the escaped path (a 404). A reserved character left
// escaped (`%2F`) is still not part of the route, nor a character an id may hold.
func TestEscapedUnreservedIsThePlainPath(t *testing.T) {
	h := newHarness(t, server.Options{})
	cid := h.conv(alice)
	ticket := h.ask(alice, cid, "a question")
	h.events(alice, ticket)
	esc := func(id string) string { return strings.Replace(id, "_", "%5f", 1) }

	for _, tc := range []struct {
		name, method, path, body string
		want                     int
	}{
		{"ticket with an escaped _", http.MethodGet, "/ask/v1/asks/" + esc(ticket), "", http.StatusOK},
		{"ticket with an escaped first letter", http.MethodGet, "/ask/v1/asks/%74" + ticket[1:], "", http.StatusOK},
		{"stream of an escaped ticket", http.MethodGet, "/ask/v1/asks/" + esc(ticket) + "/events", "", http.StatusOK},
		{"cancel of an escaped ticket", http.MethodPost, "/ask/v1/asks/" + esc(ticket) + "/cancel", "", http.StatusAccepted},
		{"HEAD of an escaped ticket", http.MethodHead, "/ask/v1/asks/" + esc(ticket), "", http.StatusOK},
		{"escaped route segment", http.MethodGet, "/ask/%761/asks/" + ticket, "", http.StatusOK},
		{"escaped dot in a route segment", http.MethodGet, "/ask/v1/openapi%2Eyaml", "", http.StatusOK},
		{"ask in an escaped conversation", http.MethodPost, "/ask/v1/conversations/" + esc(cid) + "/asks", `{"question":"another"}`, http.StatusAccepted},
		{"an escaped / stays out of the id", http.MethodGet, "/ask/v1/asks/" + esc(ticket) + "%2Fevents", "", http.StatusBadRequest},
		{"an escaped dot segment", http.MethodGet, "/ask/v1/asks/%2e%2e/" + ticket, "", http.StatusNotFound},
		{"another's escaped ticket", http.MethodGet, "/ask/v1/asks/" + esc(ticket), "", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, "http://ask.test"+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			tok := alice
			if strings.HasPrefix(tc.name, "another's") {
				tok = bob
			}
			req.Header.Set("Authorization", "Bearer "+tok)
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			resp := h.do(req)
			if resp.StatusCode != tc.want {
				t.Fatalf("%s %s: %d, want %d: %s", tc.method, tc.path, resp.StatusCode, tc.want, readBody(t, resp))
			}
			if tc.want >= 400 && tc.method != http.MethodHead {
				problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), readBody(t, resp), tc.want)
			}
		})
	}
}
