package client_test

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/das-ask/ask/client"
)

// TestRedirectToAnotherOriginIsNotFollowed: net/http follows a redirect with the Authorization
// header whenever the target's host is the service's or a subdomain of it (another port, or
// http after https, included), and a 307 sends the body again: a createAsk's, the question. A
// redirect to another origin is answered as the refusal it is; one within the origin is followed.
func TestRedirectToAnotherOriginIsNotFollowed(t *testing.T) {
	for _, tt := range []struct {
		name, to string
		followed bool
	}{
		{"another port", "http://ask.test:8443/ask/v1/conversations/c_1/asks", false},
		{"a subdomain", "http://evil.ask.test/ask/v1/conversations/c_1/asks", false},
		{"https", "https://ask.test/ask/v1/conversations/c_1/asks", false},
		{"the same origin", "http://ask.test/ask/v1/conversations/c_2/asks", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var reached []string
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				host := r.URL.Scheme + "://" + r.URL.Host // memnet hands the handler the client's request
				if host == "http://ask.test" && r.URL.Path == "/ask/v1/conversations/c_1/asks" {
					w.Header().Set("Location", tt.to)
					w.WriteHeader(http.StatusTemporaryRedirect)
					return
				}
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				reached = append(reached, host+" "+r.Header.Get("Authorization")+" "+string(b))
				mu.Unlock()
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, `{"type":"about:blank","title":"Not Found","status":404}`)
			})
			c := memClient(t, h, client.Options{Token: client.StaticToken("tok-secret")})
			_, err := c.Ask(t.Context(), "c_1", "zq-redirect how many incidents?")
			var ae *client.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("Ask: %v, want an APIError", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if tt.followed {
				if ae.StatusCode != http.StatusNotFound || len(reached) != 1 || reached[0] != `http://ask.test Bearer tok-secret {"question":"zq-redirect how many incidents?"}` {
					t.Errorf("status %d, reached %q: want the redirect followed, with the bearer and the body", ae.StatusCode, reached)
				}
				return
			}
			if ae.StatusCode != http.StatusTemporaryRedirect || len(reached) != 0 {
				t.Errorf("status %d, reached %q: want the 307 answered and nothing sent to %s", ae.StatusCode, reached, tt.to)
			}
		})
	}
}
