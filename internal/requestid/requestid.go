// Package requestid gives every API response an X-Request-Id: the caller's (or the gateway's)
// when well-formed, else a fresh one. It has one owner per request: whichever layer sets the
// header first (package obs, when askd or the dev stack instruments the service) decides it,
// and Handler (the server's own, always there) only fills it in when nobody did, so the id is
// the same in the response, the request log line and the ask's span, in every mode.
package requestid

import (
	"crypto/rand"
	"net/http"
)

// Header carries a request's id.
const Header = "X-Request-Id"

// From returns given when it is 1 to 128 characters of letters, digits and "-_.:" (anything
// else could forge log lines or carry a secret), else a fresh random id.
func From(given string) string {
	if n := len(given); n > 0 && n <= 128 {
		ok := true
		for i := 0; i < n && ok; i++ {
			c := given[i]
			ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':'
		}
		if ok {
			return given
		}
	}
	return rand.Text()
}

// Of returns the request's id: its one X-Request-Id when well-formed (From), else a fresh
// one. A header given twice is not well-formed (which of two ids would the caller look for?),
// as the service takes no other header twice; net/http would read the first.
func Of(h http.Header) string {
	if v := h[Header]; len(v) == 1 {
		return From(v[0])
	}
	return From("")
}

// Handler sets X-Request-Id on every response of next, unless a layer outside it already did.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if w.Header().Get(Header) == "" {
			w.Header().Set(Header, Of(r.Header))
		}
		next.ServeHTTP(w, r)
	})
}
