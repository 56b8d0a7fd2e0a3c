package obs

import (
	"context"
	"net/http"

	"github.com/das-ask/ask/internal/requestid"
)

// HeaderRequestID carries a request's id: echoed when the caller (or the gateway) sent a
// well-formed one, generated otherwise.
const HeaderRequestID = requestid.Header

type requestIDKey struct{}

// RequestID is the id of the API request ctx belongs to, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// requestID returns the caller's id when well-formed and given once, else a fresh one
// (requestid.Of: the same rule as the server's own, so the id does not depend on whether obs
// is in front).
func requestID(h http.Header) string { return requestid.Of(h) }
