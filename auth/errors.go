package auth

import "errors"

// RFC 6750 §3.1 error codes carried by Error.Code.
const (
	// CodeInvalidToken: the token is malformed, expired, not for us, or its signature does not
	// verify.
	CodeInvalidToken = "invalid_token"
	// CodeInsufficientScope: the token is valid but does not grant the required scope.
	CodeInsufficientScope = "insufficient_scope"
	// CodeInvalidRequest: the request is malformed as a bearer request (more than one
	// Authorization header); it is answered 400, with a challenge carrying this code.
	CodeInvalidRequest = "invalid_request"
)

// ErrKeysNotLoaded is in the chain of the *Error (errors.Is) for a bearer that could not be
// checked at all: the issuer's JWKS has never been fetched, so no key is known. It says
// nothing against the token, so the ask service answers it 503 with Retry-After, as its own
// unavailability, rather than 401 invalid_token, which tells a client to drop a token that may
// well be good (an MCP resource, ResourceMiddleware, still answers it 401).
var ErrKeysNotLoaded = errors.New("no signing keys are known yet")

// Error is why a bearer was rejected. Code is an RFC 6750 error code; Description is a short,
// fixed phrase safe to show the caller (it never contains the token or key material).
// Every Authenticate error from this package is an *Error; any error means 401, but one that
// wraps ErrKeysNotLoaded, which the ask service answers 503.
type Error struct {
	Code        string
	Description string
	err         error
}

func (e *Error) Error() string { return "auth: " + e.Code + ": " + e.Description }

// Unwrap returns the underlying cause (a jwt or jwkset error), for logs and errors.Is.
func (e *Error) Unwrap() error { return e.err }

func invalidToken(description string, cause error) *Error {
	return &Error{Code: CodeInvalidToken, Description: description, err: cause}
}
