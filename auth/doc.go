// Package auth validates bearer tokens for the ask service and for every source that defends
// the same resource: one set of settings (Config, read from the DAS_* environment by
// package config) and one Validator, so the service and its sources accept exactly the same
// tokens.
//
// A token is accepted when all of these hold:
//   - its signature verifies with a key from the tenant's JWKS, found by the token's `kid`
//     (an RSA key of at least 2048 bits, published for verifying signatures: no `use` other
//     than "sig", and "verify" among its `key_ops` when it has any);
//   - its header has no `crit` parameter: no critical extension (RFC 7515 §4.1.11) is
//     understood;
//   - its `alg` is in the allow-list (asymmetric algorithms only; never `none` or HMAC);
//   - `iss` equals Config.Issuer and `aud` contains Config.Audience;
//   - `exp` is present and not passed, and `nbf` and `iat` (when present) are not in the
//     future, all give or take Config.Leeway; each of the three is a JSON number (a string
//     holding a number is refused);
//   - it grants every scope in Config.RequiredScope (space-separated `scope` claim, or an `scp`
//     array);
//   - it carries a non-empty `oid` claim, which becomes ask.Identity.OID; its issuer, with its
//     `tid` claim (a string) when it has one, becomes ask.Identity.Tenant.
//
// Every rejection is an *Error whose Code is an RFC 6750 error code. No error, log line or
// response produced by this package contains the token.
//
// For net/http servers, Middleware turns a Validator into a guard that answers 401
// `application/problem+json` with a `WWW-Authenticate: Bearer` challenge (400 with an
// invalid_request one for a malformed Authorization: two headers, or the Bearer scheme with no
// token after a space), and puts the
// caller's ask.Identity in the request context (FromContext). ResourceMiddleware is the guard
// of an MCP server (the demo sources), following MCP's authorization rules: every challenge
// also names the resource's protected resource metadata (resource_metadata, RFC 9728) and the
// scope, and a valid token without a required scope is answered 403 insufficient_scope
// (RFC 6750 §3.1) rather than 401.
package auth
