package server_test

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
)

func TestNewRequires(t *testing.T) {
	if _, err := server.New(server.Options{Authenticator: fakeAuth{}}); err == nil {
		t.Error("New without a Runner succeeded")
	}
	if _, err := server.New(server.Options{Runner: answerRunner(0)}); err == nil {
		t.Error("New without an Authenticator succeeded")
	}
	if _, err := server.New(server.Options{Runner: answerRunner(0), Authenticator: fakeAuth{}, MaxEvents: 3}); err == nil {
		t.Error("New with MaxEvents 3 succeeded")
	}
}

// TestBasePaths: the API, the validator and Location headers follow the configured base path.
func TestBasePaths(t *testing.T) {
	for _, base := range []string{"/", "/gateway/ask"} {
		t.Run(base, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, server.Options{BasePath: base})
				prefix := strings.TrimSuffix(base, "/")
				// A conversation without a body is fine: the request body is optional.
				req, _ := http.NewRequest(http.MethodPost, "http://ask.test"+prefix+"/v1/conversations", nil)
				req.Header.Set("Authorization", "Bearer "+alice)
				resp := h.do(req)
				if resp.StatusCode != http.StatusCreated || !strings.HasPrefix(resp.Header.Get("Location"), prefix+"/v1/conversations/") {
					t.Fatalf("create conversation: %d %q %s", resp.StatusCode, resp.Header.Get("Location"), readBody(t, resp))
				}
				ticket := h.ask(alice, h.conv(alice), "based")
				checkLifecycle(t, h.events(alice, ticket), gen.EventTypeAnswer)
				bad := newReq(t, http.MethodPost, prefix+"/v1/conversations/"+h.conv(alice)+"/asks", alice, `{"question":""}`)
				resp = h.do(bad)
				problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), readBody(t, resp), http.StatusBadRequest)
				if base != "/" {
					resp = h.do(newReq(t, http.MethodGet, "/ask/v1/asks/"+ticket, alice, ""))
					problemOf(t, resp.StatusCode, resp.Header.Get("Content-Type"), readBody(t, resp), http.StatusNotFound)
				}
			})
		})
	}
}
