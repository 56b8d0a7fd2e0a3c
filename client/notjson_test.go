package client_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/das-ask/ask/client"
)

// An event whose data is not JSON ends the stream with an error naming the frame, never its data:
// an accepted event's data holds the question. The error wrapped the JSON decoder's, which quotes
// the first character it could not read ("invalid character 'H' …"): the question's.
func TestNotJSONEventErrorHoldsNoneOfItsData(t *testing.T) {
	c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sseHeaders(w)
		_, _ = io.WriteString(w, "id: 1\nevent: accepted\ndata: How many sev1 incidents did we have?\n\n")
	}), client.Options{})
	var last error
	for _, err := range c.Events(t.Context(), "tk", client.EventsOptions{}) {
		last = err
	}
	if last == nil || !strings.Contains(last.Error(), "event 1") {
		t.Fatalf("error %v: want one naming event 1", last)
	}
	if msg := last.Error(); strings.Contains(msg, "'H'") || strings.Contains(msg, "How") {
		t.Errorf("error %q holds the event's data", msg)
	}
}

// So is one whose data is not JSON and whose type is not the contract's (no event name, or one
// this client does not know): it was passed on as an UnknownEvent holding the data as sent, its
// seq taken from the frame's id, and the stream went on, where every other client ends it.
func TestNotJSONEventOfUnknownTypeIsFinal(t *testing.T) {
	// The last event's name is the question: a service's text the contract does not name is not
	// repeated either (the eval writes the error into its report).
	for _, head := range []string{"id: 1\n", "id: 1\nevent: thought\n", "id: 1\nevent: How many sev1 incidents did we have?\n"} {
		c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			_, _ = io.WriteString(w, head+"data: How many sev1 incidents did we have?\n\n")
		}), client.Options{})
		var last error
		for ev, err := range c.Events(t.Context(), "tk", client.EventsOptions{}) {
			if err == nil {
				t.Errorf("%q: delivered %T, want an error", head, ev.Value)
			}
			last = err
		}
		if last == nil || !strings.Contains(last.Error(), "event 1") || strings.Contains(last.Error(), "How") {
			t.Errorf("%q: error %v: want one naming event 1 and none of its data", head, last)
		}
	}
}

// So is one whose data is JSON's null: no event either, and not the JSON object Event.Data
// promises. Without an event name it was passed on as an UnknownEvent whose Data was "null",
// and the stream went on, where an array, a string or a number ended it.
func TestNullEventIsFinal(t *testing.T) {
	for _, head := range []string{"id: 1\n", "id: 1\nevent: thought\n", "id: 1\nevent: step\n"} {
		c := memClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			_, _ = io.WriteString(w, head+"data: null\n\n")
		}), client.Options{Reconnect: client.Reconnect{Initial: time.Millisecond, Max: time.Millisecond, Attempts: 1}})
		var last error
		for ev, err := range c.Events(t.Context(), "tk", client.EventsOptions{}) {
			if err == nil {
				t.Errorf("%q: delivered %T with data %s, want an error", head, ev.Value, ev.Data)
			}
			last = err
		}
		if !errors.Is(last, client.ErrProtocol) || !strings.Contains(last.Error(), "event 1") {
			t.Errorf("%q: error %v: want a protocol error naming event 1", head, last)
		}
	}
}

// A success whose body is not the service's JSON — a sign-in portal's or a web server's page at
// the URL, a proxy that rewrote the reply — is an *UnexpectedResponseError, tried once. It read
// as the service's refusal ("ask createAsk: 202 Accepted", which `ask` printed as "the service
// refused the request: 200 OK"), and a body labelled JSON that was not JSON was retried eight
// times as a failed connection.
func TestSuccessThatIsNotTheServicesIsFinal(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		status                  int
	}{
		{"a page", "text/html", "<html><body>Please sign in</body></html>", 200},
		{"a page as 202", "text/html", "<html>Accepted</html>", 202},
		{"JSON that is not", "application/json", "<html>Accepted</html>", 202},
		{"JSON that is no object", "application/json", "[]", 202},
		{"another success", "application/json", `{"ok":true}`, 200},
		{"a ticket that names none", "application/json", `{}`, 202},
		{"a ticket whose id is empty", "application/json", `{"ticket":"","status_url":"/ask/v1/asks/"}`, 202},
		// JSON the operation's type cannot hold was retried eight times as a failed connection.
		{"a ticket whose id is a number", "application/json", `{"ticket":5}`, 202},
		{"a ticket whose time is not one", "application/json", `{"ticket":"t","created_at":"yesterday"}`, 202},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, seen := fakeAPI(t, tc.status, tc.contentType, tc.body, nil)
			_, err := c.Ask(t.Context(), "cv", "q")
			var unexp *client.UnexpectedResponseError
			if !errors.As(err, &unexp) || unexp.StatusCode != tc.status || unexp.ContentType != tc.contentType || unexp.Op != "createAsk" {
				t.Fatalf("got %v (%T), want an UnexpectedResponseError", err, err)
			}
			if n := len(*seen); n != 1 {
				t.Errorf("%d requests, want 1: another try gets the same", n)
			}
			var apiErr *client.APIError
			if errors.As(err, &apiErr) || errors.Is(err, client.ErrMayHaveBeenMade) {
				t.Errorf("%v reads as a refusal, or as a lost reply", err)
			}
		})
	}
	// Over a real connection too: net/http traces its writes, and a traced create that was
	// answered read as one whose reply was lost ("it may have been made").
	t.Run("over TCP", func(t *testing.T) {
		var n atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html><body>Please sign in</body></html>")
		}))
		t.Cleanup(srv.Close)
		c, err := client.New(srv.URL+"/ask", client.Options{Token: client.StaticToken("tok")})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Ask(t.Context(), "cv", "q")
		var unexp *client.UnexpectedResponseError
		if !errors.As(err, &unexp) || errors.Is(err, client.ErrMayHaveBeenMade) || n.Load() != 1 {
			t.Errorf("got %v after %d requests, want one UnexpectedResponseError, not a lost reply", err, n.Load())
		}
	})
}
