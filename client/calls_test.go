package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/client"
)

// recorded is one request the fake service saw.
type recorded struct {
	method, path, auth, prefer, body string
}

func fakeAPI(t *testing.T, status int, contentType, body string, headers map[string]string) (*client.Client, *[]recorded) {
	t.Helper()
	var seen []recorded
	c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen = append(seen, recorded{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Prefer"), string(b)})
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}), client.Options{Token: client.StaticToken("tok")})
	return c, &seen
}

func TestCallsUseTheContract(t *testing.T) {
	ts := `"created_at":"2026-11-29T20:00:00Z"`
	t.Run("createConversation", func(t *testing.T) {
		c, seen := fakeAPI(t, 201, "application/json", `{"id":"cv",`+ts+`}`, nil)
		cv, err := c.CreateConversation(t.Context())
		if err != nil || cv.Id != "cv" {
			t.Fatalf("got %+v, %v", cv, err)
		}
		if r := (*seen)[0]; r.method != "POST" || r.path != "/ask/v1/conversations" || r.auth != "Bearer tok" {
			t.Errorf("request %+v", r)
		}
	})
	t.Run("createAsk", func(t *testing.T) {
		c, seen := fakeAPI(t, 202, "application/json", `{"ticket":"tk","conversation_id":"cv","events_url":"e","status_url":"s","cancel_url":"c",`+ts+`}`, nil)
		tk, err := c.Ask(t.Context(), "cv", "How many?")
		if err != nil || tk.Ticket != "tk" {
			t.Fatalf("got %+v, %v", tk, err)
		}
		r := (*seen)[0]
		var body map[string]string
		_ = json.Unmarshal([]byte(r.body), &body)
		if r.method != "POST" || r.path != "/ask/v1/conversations/cv/asks" || body["question"] != "How many?" {
			t.Errorf("request %+v", r)
		}
	})
	t.Run("getAsk long-poll", func(t *testing.T) {
		c, seen := fakeAPI(t, 200, "application/json", `{"ticket":"tk","conversation_id":"cv","state":"running","last_seq":3,`+ts+`}`, nil)
		st, err := c.Status(t.Context(), "tk", 1500*time.Millisecond)
		if err != nil || st.LastSeq != 3 {
			t.Fatalf("got %+v, %v", st, err)
		}
		if r := (*seen)[0]; r.method != "GET" || r.path != "/ask/v1/asks/tk" || r.prefer != "wait=2" {
			t.Errorf("request %+v, want Prefer wait=2", r)
		}
		if _, err := c.Status(t.Context(), "tk", 5*time.Minute); err != nil || (*seen)[1].prefer != "wait=60" {
			t.Errorf("Prefer %q, want the 60 s cap", (*seen)[1].prefer)
		}
		if _, err := c.Status(t.Context(), "tk", 0); err != nil || (*seen)[2].prefer != "" {
			t.Errorf("Prefer %q, want none without a wait", (*seen)[2].prefer)
		}
	})
	t.Run("cancelAsk", func(t *testing.T) {
		c, seen := fakeAPI(t, 202, "application/json", `{"ticket":"tk","state":"running"}`, nil)
		if _, err := c.Cancel(t.Context(), "tk"); err != nil {
			t.Fatal(err)
		}
		if r := (*seen)[0]; r.method != "POST" || r.path != "/ask/v1/asks/tk/cancel" {
			t.Errorf("request %+v", r)
		}
	})
}

func TestCallsReportProblems(t *testing.T) {
	c, _ := fakeAPI(t, 409, "application/problem+json", `{"type":"about:blank","title":"Conflict","status":409,"detail":"an ask is running","ticket":"tk-running"}`, nil)
	_, err := c.Ask(t.Context(), "cv", "secret question")
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || !errors.Is(err, client.ErrConflict) || apiErr.RunningTicket() != "tk-running" {
		t.Fatalf("got %v, want a 409 naming tk-running", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "an ask is running") || strings.Contains(msg, "secret question") || strings.Contains(msg, "tok") {
		t.Errorf("message %q: want the detail, never the question or token", msg)
	}

	if errors.Is(err, client.ErrConversationFull) {
		t.Errorf("a 409 naming a running ticket matches ErrConversationFull")
	}
	c, _ = fakeAPI(t, 409, "application/problem+json", `{"type":"about:blank","title":"Conflict","status":409,"detail":"conversation is full; start a new one"}`, nil)
	_, err = c.Ask(t.Context(), "cv", "q")
	if !errors.As(err, &apiErr) || !errors.Is(err, client.ErrConversationFull) || !errors.Is(err, client.ErrConflict) || apiErr.RunningTicket() != "" {
		t.Fatalf("got %v, want a 409 for a full conversation", err)
	}

	c, _ = fakeAPI(t, 429, "application/problem+json", `{"type":"about:blank","title":"Too Many Requests","status":429}`, map[string]string{"Retry-After": "7"})
	_, err = c.Ask(t.Context(), "cv", "q")
	if !errors.As(err, &apiErr) || !errors.Is(err, client.ErrTooManyRequests) || apiErr.RetryAfter != 7*time.Second {
		t.Fatalf("got %v, want a 429 with Retry-After 7s", err)
	}

	c, _ = fakeAPI(t, 502, "text/html", `<html>bad gateway</html>`, nil)
	_, err = c.CreateConversation(t.Context())
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || apiErr.Problem != nil {
		t.Fatalf("got %v, want a bare 502", err)
	}
}

func TestTokenSourceErrorIsFinal(t *testing.T) {
	var calls int
	c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls++ }), client.Options{
		Token: client.TokenFunc(func(context.Context) (string, error) { return "", errors.New("refresh failed") }),
	})
	_, err := collect(t, c.Events(t.Context(), "tk", client.EventsOptions{}))
	if err == nil || !strings.Contains(err.Error(), "refresh failed") || calls != 0 {
		t.Fatalf("got %v after %d requests, want the token source's error and no request", err, calls)
	}
}

// A token that cannot be a bearer credential (a line break read with it from a file, say) is
// refused before any request, once, naming the fault but not the token: net/http would refuse
// the header only as it sent it, an error that reads as an unreachable service and is retried.
func TestTokenThatIsNoBearerIsFinal(t *testing.T) {
	for _, tok := range []string{"", "abc\n", "ab c", "a\tb", "x\x7fy", "x\x00y"} {
		var calls int
		c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls++ }), client.Options{
			Token: client.StaticToken(tok),
		})
		_, err := c.CreateConversation(t.Context())
		if err == nil || !strings.Contains(err.Error(), "token") || calls != 0 {
			t.Fatalf("token %q: got %v after %d requests, want a token error and no request", tok, err, calls)
		}
		if len(tok) > 1 && strings.Contains(err.Error(), tok) {
			t.Fatalf("token %q: the error %q quotes the token", tok, err)
		}
		_, err = collect(t, c.Events(t.Context(), "tk", client.EventsOptions{}))
		if err == nil || calls != 0 {
			t.Fatalf("token %q: events got %v after %d requests, want a token error and no request", tok, err, calls)
		}
	}
}

// A token given with the header's scheme ("Bearer eyJ…", the commonest slip) is told to be
// given alone, not that it holds white space at byte 6, which did not say what to change.
func TestTokenWithItsSchemeIsToldToComeAlone(t *testing.T) {
	for _, tok := range []string{"Bearer eyJhbGciOiJSUzI1NiJ9.e30.c2ln", "bearer eyJhbGciOiJSUzI1NiJ9.e30.c2ln"} {
		err := client.CheckBearer(tok)
		if err == nil || !strings.Contains(err.Error(), `starts with "Bearer ": give the token alone`) || strings.Contains(err.Error(), "c2ln") {
			t.Errorf("CheckBearer(%q) = %v, want the scheme named and the token left out", tok, err)
		}
	}
	if err := client.CheckBearer("eyJhbGciOiJSUzI1NiJ9.e30.c2ln"); err != nil {
		t.Errorf("a bearer token refused: %v", err)
	}
}

func TestNewRejectsBadURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080/ask", "ftp://x/ask", "http://:8080/ask"} {
		if _, err := client.New(u, client.Options{}); err == nil {
			t.Errorf("New(%q) succeeded, want an error", u)
		}
	}
}

// A 501 or 505 says the server does not do what was asked: refused at once, never retried
// (a 503 is: TestCreateRetriesTransientStatuses).
func TestNotImplementedIsNotRetried(t *testing.T) {
	for _, status := range []int{501, 505} {
		c, seen := fakeAPI(t, status, "application/problem+json", `{"type":"about:blank","title":"x","status":`+strconv.Itoa(status)+`}`, nil)
		_, err := c.CreateConversation(t.Context())
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != status || len(*seen) != 1 {
			t.Errorf("%d: err %v after %d requests, want the %d after one", status, err, len(*seen), status)
		}
	}
}
