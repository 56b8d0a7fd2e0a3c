package auth

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
)

// Realm is the realm of every WWW-Authenticate challenge this package writes.
const Realm = "das"

// BearerToken returns the token of an `Authorization: Bearer <token>` header (the scheme is
// matched case-insensitively), and false when there is no such header, it is empty, or the
// request carries more than one Authorization header.
func BearerToken(r *http.Request) (string, bool) {
	if len(r.Header.Values("Authorization")) != 1 {
		return "", false // none, or more than one: no one credential to take
	}
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// Credential reads the request's bearer credential, for a guard (this package's, and the ask
// service's): its token; "" and nil when the request carries none (no Authorization, or
// another scheme: a 401 whose challenge names no error, RFC 6750 §3.1); or an
// invalid_request *Error when it carries one malformed, a 400 with that challenge: two
// Authorization headers (RFC 9110 §11.6.2: which one the request is made with is anyone's
// guess, so it is made with neither), or the Bearer scheme with no token after a space
// ("Bearer" alone, "Bearer ", a tab between: bearer authentication attempted). Its
// Description says which; InvalidRequestDetail words it for a problem.
func Credential(r *http.Request) (string, *Error) {
	if len(r.Header.Values("Authorization")) > 1 {
		return "", &Error{Code: CodeInvalidRequest, Description: "more than one Authorization header"}
	}
	if token, ok := BearerToken(r); ok {
		return token, nil
	}
	h := r.Header.Get("Authorization") // as BearerToken reads it: a leading space is no scheme
	if len(h) < len("Bearer") || !strings.EqualFold(h[:len("Bearer")], "Bearer") {
		return "", nil
	}
	if rest := h[len("Bearer"):]; rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", nil // another scheme that begins so ("Bearerx")
	}
	return "", &Error{Code: CodeInvalidRequest, Description: "the Authorization header names the Bearer scheme but holds no token after a space"}
}

// InvalidRequestDetail is the problem detail of the 400 for Credential's e.
func InvalidRequestDetail(e *Error) string {
	return e.Description + "; send one Authorization: Bearer <token>"
}

// Middleware admits a request only with a bearer v accepts, and puts the caller's identity in
// its context (FromContext). Otherwise it answers 401 (see WriteUnauthorized) and next is not
// called. Insufficient scope is a 401 too: the ask contract answers 401 for any bearer that is
// not valid for the service. A request with more than one Authorization header, or one that
// names the Bearer scheme with no token after a space (Credential), is a 400 with an
// invalid_request challenge (RFC 6750 §3.1), as the ask service answers it: it carries
// credentials, but not one it can take.
func Middleware(v ask.Authenticator, next http.Handler) http.Handler {
	return guard(v, nil, next)
}

// ResourceOptions describe a protected resource that publishes OAuth 2.0 Protected Resource
// Metadata (RFC 9728), for ResourceMiddleware.
type ResourceOptions struct {
	// MetadataURL returns the absolute URL of the metadata document of the resource r asked
	// for; every challenge names it (resource_metadata, RFC 9728 §5.1). Required.
	MetadataURL func(r *http.Request) string
	// Scope is the space-separated scope a token must grant, named in every challenge (scope,
	// RFC 6750 §3); "" names none.
	Scope string
}

// ResourceMiddleware is Middleware for a resource server that follows MCP's authorization rules
// (an MCP server protected by bearer tokens): every challenge also carries resource_metadata
// and scope, and a valid token that lacks a required scope is answered 403 with an
// insufficient_scope challenge (RFC 6750 §3.1) instead of 401, so that a client asks for the
// scope rather than for a token like the one it has.
func ResourceMiddleware(v ask.Authenticator, opts ResourceOptions, next http.Handler) http.Handler {
	return guard(v, &opts, next)
}

// guard is Middleware, and ResourceMiddleware when res is not nil.
func guard(v ask.Authenticator, res *ResourceOptions, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var params []string
		if res != nil {
			params = append(params, `resource_metadata="`+quoteSafe(res.MetadataURL(r))+`"`)
			if res.Scope != "" {
				params = append(params, `scope="`+quoteSafe(res.Scope)+`"`)
			}
		}
		token, bad := Credential(r)
		if bad != nil {
			writeProblem(w, r, http.StatusBadRequest, "Bad Request", InvalidRequestDetail(bad), challenge(bad, params))
			return
		}
		if token == "" {
			writeProblem(w, r, http.StatusUnauthorized, "Unauthorized", "a bearer token is required", challenge(nil, params))
			return
		}
		id, err := v.Authenticate(r.Context(), token)
		if err != nil {
			status, title := http.StatusUnauthorized, "Unauthorized"
			if code, _ := describe(err); res != nil && code == CodeInsufficientScope {
				status, title = http.StatusForbidden, "Forbidden"
			}
			writeProblem(w, r, status, title, Describe(err), challenge(err, params))
			return
		}
		next.ServeHTTP(w, r.WithContext(WithIdentity(r.Context(), id)))
	})
}

// Challenge returns the WWW-Authenticate value for a request rejected because of err (RFC 6750
// §3): with err == nil (no token was sent) only the realm; otherwise the error code (an *Error's
// Code, or invalid_token for any other error) and its description.
func Challenge(err error) string {
	return challenge(err, nil)
}

// challenge is Challenge with params (`name="value"`, already quoted) after the realm.
func challenge(err error, params []string) string {
	c := `Bearer realm="` + Realm + `"`
	for _, p := range params {
		c += ", " + p
	}
	if err == nil {
		return c
	}
	code, desc := describe(err)
	return c + `, error="` + code + `", error_description="` + quoteSafe(desc) + `"`
}

// WriteUnauthorized answers 401 application/problem+json with the Challenge for err (nil: no
// token was sent). The problem's detail is the error's Description; it never contains the token.
func WriteUnauthorized(w http.ResponseWriter, r *http.Request, err error) {
	detail := "a bearer token is required"
	if err != nil {
		_, detail = describe(err)
	}
	writeProblem(w, r, http.StatusUnauthorized, "Unauthorized", detail, Challenge(err))
}

// writeProblem answers status application/problem+json with a Bearer challenge.
func writeProblem(w http.ResponseWriter, r *http.Request, status int, title, detail, challenge string) {
	p := gen.Problem{Type: "about:blank", Title: title, Status: status, Detail: &detail}
	if r != nil && r.URL != nil {
		// Escaped as the request escaped it: instance is a URI reference (RFC 9457 §3.1.5).
		instance := r.URL.EscapedPath()
		p.Instance = &instance
	}
	h := w.Header()
	h.Set("WWW-Authenticate", challenge)
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

// Describe is the caller-safe description of a bearer's rejection, as a 401's detail says it
// (never the token; an error that is not an *Error is reduced to a generic phrase).
func Describe(err error) string {
	_, desc := describe(err)
	return desc
}

// describe returns the RFC 6750 code and a caller-safe description for err. An error that is
// not an *Error is reduced to a generic phrase: its text could say anything.
func describe(err error) (code, desc string) {
	var e *Error
	if errors.As(err, &e) && e.Code != "" {
		return e.Code, e.Description
	}
	return CodeInvalidToken, "token is invalid"
}

// quoteSafe keeps a description inside an RFC 6750 quoted-string: error_description allows
// %x20-21 / %x23-5B / %x5D-7E only, so quotes, backslashes and anything outside printable
// ASCII become a space.
func quoteSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return ' '
		}
		return r
	}, s)
}
