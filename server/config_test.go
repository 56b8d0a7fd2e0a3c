package server_test

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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

// TestNewRefusesNegativeOptions: a negative limit or duration is a mistake New names, never
// taken silently as the default (zero is the default; ShutdownGrace alone reads negative as
// none), and a retained cap below the in-flight cap, which could never be reached, is refused.
func TestNewRefusesNegativeOptions(t *testing.T) {
	for name, edit := range map[string]func(*server.Options){
		"TTL":                   func(o *server.Options) { o.TTL = -time.Second },
		"MaxEvents":             func(o *server.Options) { o.MaxEvents = -1 },
		"KeepAlive":             func(o *server.Options) { o.KeepAlive = -time.Second },
		"Deadline":              func(o *server.Options) { o.Deadline = -time.Second },
		"MaxInFlight":           func(o *server.Options) { o.MaxInFlight = -1 },
		"MaxTickets":            func(o *server.Options) { o.MaxTickets = -1 },
		"MaxConversationsPerID": func(o *server.Options) { o.MaxConversationsPerID = -1 },
		"MaxRetainedPerID":      func(o *server.Options) { o.MaxRetainedPerID = -1 },
		"MaxTurns":              func(o *server.Options) { o.MaxTurns = -1 },
		"MaxBodyBytes":          func(o *server.Options) { o.MaxBodyBytes = -1 },
		"StoreWait":             func(o *server.Options) { o.StoreWait = -time.Second },
	} {
		o := server.Options{Runner: answerRunner(0), Authenticator: fakeAuth{}}
		edit(&o)
		if _, err := server.New(o); err == nil || !strings.Contains(err.Error(), "Options."+name+" is negative") {
			t.Errorf("New with a negative %s: %v, want an error naming it", name, err)
		}
	}
	_, err := server.New(server.Options{Runner: answerRunner(0), Authenticator: fakeAuth{}, MaxInFlight: 5, MaxRetainedPerID: 4})
	if err == nil || !strings.Contains(err.Error(), "MaxRetainedPerID (4) is below MaxInFlight (5)") {
		t.Errorf("New with MaxRetainedPerID below MaxInFlight: %v", err)
	}
	s, err := server.New(server.Options{Runner: answerRunner(0), Authenticator: fakeAuth{}, ShutdownGrace: -1})
	if err != nil {
		t.Fatalf("New with no shutdown grace: %v", err)
	}
	if err := s.Shutdown(t.Context()); err != nil {
		t.Error(err)
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
