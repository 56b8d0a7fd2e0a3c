package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/das-ask/ask/client"
)

// createConversation names no resource, so the contract gives it no 404: one means nothing serves
// the API at the base URL (most often its gateway prefix, /ask, left out). The error said only
// "404 Not Found: no such resource" and matched ErrNotFound, documented as a missing
// conversation or ticket; it now says to check the base URL.
func TestCreateConversation404SaysCheckTheBaseURL(t *testing.T) {
	svc := startService(t, 0)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c, err := client.New(svc.http.URL, client.Options{Token: client.StaticToken("alice-token"), HTTPClient: &http.Client{Transport: tr}}) // no /ask
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateConversation(t.Context())
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusNotFound {
		t.Fatalf("got %v, want a 404", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "base URL") || !strings.Contains(msg, svc.http.URL) {
		t.Errorf("message %q: want it to say the base URL %s serves no ask API", msg, svc.http.URL)
	}
}

// A base URL New refuses is quoted in its error with any password in it hidden, as the
// TypeScript client's TypeError does: the error quoted it as given, password and all, to a caller
// that logs it.
func TestRefusedBaseURLHidesItsPassword(t *testing.T) {
	for _, u := range []string{"ftp://user:s3cret@host/ask", "http://user:s3cret%zz@host/ask", "http://user:s3cret@host:port/ask"} {
		_, err := client.New(u, client.Options{})
		if err == nil || !strings.Contains(err.Error(), "user:xxxxx@") {
			t.Fatalf("New(%q) = %v, want a refusal quoting the URL redacted", u, err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(%q): %v shows the password", u, err)
		}
	}
}

// A user name and password in the base URL are not sent: net/http sent them as Basic credentials
// (an Authorization header a token then replaced, but with no token the password itself, to the
// service and every hop that logs it), where the TypeScript and Python clients leave them out.
func TestBaseURLCredentialsAreNotSent(t *testing.T) {
	var auths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auths = append(auths, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"c_1","created_at":"2026-01-01T00:00:00Z"}`))
	}))
	t.Cleanup(srv.Close)
	withUser := strings.Replace(srv.URL, "http://", "http://user:s3cret@", 1) + "/ask"
	for _, tok := range []client.TokenSource{nil, client.StaticToken("t")} {
		c, err := client.New(withUser, client.Options{Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateConversation(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if len(auths) != 2 || auths[0] != "" || auths[1] != "Bearer t" {
		t.Errorf("Authorization sent: %q, want none without a token and the bearer with one", auths)
	}
}

// A base URL with a query or fragment is refused when the client is made: the service's paths are
// joined to the base path, and the generated client resolved them against a query's parent
// instead (…/ask?k=1 sent /v1/conversations to the origin's root, the gateway's prefix lost and
// the bearer with it: found by an audit). The query's values are not quoted.
func TestBaseURLWithAQueryIsRefused(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:8080/ask?key=s3cret", "http://127.0.0.1:8080/ask#top", "http://127.0.0.1:8080/ask?"} {
		_, err := client.New(u, client.Options{Token: client.StaticToken("t")})
		if err == nil || !strings.Contains(err.Error(), "query or a fragment") || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(%q): %v, want a refusal naming the query, without its value", u, err)
		}
	}
}
