package obs

import (
	"context"
	"crypto/rand"
)

// HeaderRequestID carries a request's id: echoed when the caller (or the gateway) sent a
// well-formed one, generated otherwise.
const HeaderRequestID = "X-Request-Id"

type requestIDKey struct{}

// RequestID is the id of the API request ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// requestID returns the caller's id when it is 1 to 128 characters of letters, digits and
// "-_.:" (anything else could forge log lines or carry a secret), else a fresh random one.
func requestID(given string) string {
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
