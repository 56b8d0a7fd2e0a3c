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

func TestLookupConfig(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	got, err := server.LookupConfig(env())
	if err != nil {
		t.Fatal(err)
	}
	want := server.Config{BasePath: "/ask", TTL: 900 * time.Second, MaxEvents: 1000, KeepAlive: 10 * time.Second,
		Deadline: 120 * time.Second, MaxInFlight: 4, MaxTickets: 10000, MaxBodyBytes: 65536, ShutdownGrace: 10 * time.Second,
		MaxConversationsPerID: 100, MaxRetainedPerID: 1000, MaxTurns: 50}
	if got != want {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}
	got, err = server.LookupConfig(env("DAS_ASK_PATH", "/gw/ask/", "DAS_ASK_TTL_S", "60", "DAS_ASK_MAX_EVENTS", "50",
		"DAS_ASK_KEEPALIVE_S", "3", "DAS_ASK_DEADLINE_S", "30", "DAS_ASK_MAX_INFLIGHT_PER_ID", "2", "DAS_ASK_MAX_TICKETS", "10",
		"DAS_ASK_MAX_BODY_BYTES", "4096", "DAS_ASK_SHUTDOWN_GRACE_S", "0", "DAS_ASK_MAX_CONVERSATIONS_PER_ID", "7",
		"DAS_ASK_MAX_RETAINED_PER_ID", "2", "DAS_ASK_MAX_TURNS_PER_CONVERSATION", "9"))
	if err != nil {
		t.Fatal(err)
	}
	want = server.Config{BasePath: "/gw/ask", TTL: time.Minute, MaxEvents: 50, KeepAlive: 3 * time.Second,
		Deadline: 30 * time.Second, MaxInFlight: 2, MaxTickets: 10, MaxBodyBytes: 4096,
		MaxConversationsPerID: 7, MaxRetainedPerID: 2, MaxTurns: 9}
	if got != want {
		t.Errorf("set: got %+v, want %+v", got, want)
	}
	if o := got.Options(); o.MaxConversationsPerID != 7 || o.MaxRetainedPerID != 2 || o.MaxTurns != 9 {
		t.Errorf("Options() = %+v: the per-identity caps and MaxTurns are not carried", o)
	}
	if o := got.Options(); o.ShutdownGrace >= 0 || o.BasePath != "/gw/ask" {
		t.Errorf("Options() = %+v: a zero grace must mean none", o)
	}
	if got, _ := server.LookupConfig(env("DAS_ASK_PATH", "/")); got.BasePath != "" || got.Options().BasePath != "/" {
		t.Errorf("root path: %+v", got)
	}

	for _, bad := range [][2]string{
		{"DAS_ASK_TTL_S", "ten"}, {"DAS_ASK_TTL_S", "0"}, {"DAS_ASK_TTL_S", "-5"}, {"DAS_ASK_MAX_EVENTS", "7"},
		{"DAS_ASK_MAX_EVENTS", "1e3"}, {"DAS_ASK_KEEPALIVE_S", "0"}, {"DAS_ASK_DEADLINE_S", "2m"},
		{"DAS_ASK_MAX_INFLIGHT_PER_ID", "0"}, {"DAS_ASK_MAX_TICKETS", "-1"}, {"DAS_ASK_MAX_BODY_BYTES", "10"},
		{"DAS_ASK_SHUTDOWN_GRACE_S", "-1"}, {"DAS_ASK_PATH", "ask"}, {"DAS_ASK_PATH", "/a?b"}, {"DAS_ASK_PATH", "/a/../b"},
		{"DAS_ASK_MAX_CONVERSATIONS_PER_ID", "0"}, {"DAS_ASK_MAX_CONVERSATIONS_PER_ID", "many"},
		{"DAS_ASK_MAX_RETAINED_PER_ID", "-3"}, {"DAS_ASK_MAX_RETAINED_PER_ID", "1.5"},
		{"DAS_ASK_MAX_TURNS_PER_CONVERSATION", "0"}, {"DAS_ASK_MAX_TURNS_PER_CONVERSATION", "10001"},
		// Below the in-flight cap (4 by default): running asks are retained tickets, so it could
		// never be reached.
		{"DAS_ASK_MAX_RETAINED_PER_ID", "3"},
	} {
		_, err := server.LookupConfig(env(bad[0], bad[1]))
		if err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s=%q: error %v should name the variable", bad[0], bad[1], err)
		}
	}
	_, err = server.LookupConfig(env("DAS_ASK_TTL_S", "x", "DAS_ASK_DEADLINE_S", "y"))
	if err == nil || !strings.Contains(err.Error(), "DAS_ASK_TTL_S") || !strings.Contains(err.Error(), "DAS_ASK_DEADLINE_S") {
		t.Errorf("all invalid values are reported together: %v", err)
	}
}

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
