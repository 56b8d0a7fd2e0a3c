// Package idp is a development identity provider: it publishes signing keys as a JWKS and mints
// bearer tokens for named identities, so the ask service and the demo sources can be run and
// tested against real, signed JWTs. It is a dev tool, never a production issuer: anyone who can
// reach POST /token from loopback can become anyone.
//
// What it serves (Handler):
//
//	GET  /.well-known/jwks.json                   the public signing keys (RS256 and ES256, with kids)
//	GET  /.well-known/oauth-authorization-server  authorization server metadata (RFC 8414): issuer, jwks_uri, token_endpoint
//	GET  /.well-known/openid-configuration        OIDC discovery: the same, and the OIDC fields
//	POST /token                                   mint a token; loopback callers only
//
// It has no authorization endpoint: tokens come from POST /token alone, so an MCP client that
// follows a protected resource's metadata here finds no authorization-code flow to run.
//
// POST /token answers 403 unless the peer address is loopback (forwarding headers are ignored)
// and the Host names loopback or the issuer's own host (against DNS rebinding from a browser),
// and to a browser's request from a web page of another origin (by Sec-Fetch-Site or Origin; a
// request with neither, a program's, passes).
//
// POST /token takes a form or a JSON object with oid (required), tid (the tenant; left out, the
// token has none), aud (default das), scope (default das, space-separated), ttl_s (default
// 3600), expired (true gives a token whose exp has passed) and alg (RS256 or ES256), and answers
// {"access_token": "...", "token_type": "Bearer", "expires_in": n}. A tid, when given, is trimmed
// and must then be printable UTF-8, not empty and at most MaxTIDLen bytes; anything else is a 400
// invalid_request. The ask service owns work by (issuer, tid, oid), so alice with tid T1 is
// another identity than alice with none: a tid is how the dev stack shows tenant separation.
//
// Keys persist across restarts in Options.StateDir (one PEM file per algorithm, mode 0600);
// with no StateDir they live in memory and every New publishes fresh keys.
//
// In tests, start one on httptest and mint tokens in process:
//
//	srv := httptest.NewUnstartedServer(nil)
//	p, _ := idp.New(idp.Options{Issuer: "http://" + srv.Listener.Addr().String()})
//	srv.Config.Handler = p.Handler()
//	srv.Start()
//	token, _ := p.Mint(idp.Claims{OID: "alice"})
//
// Package idptest does exactly that, and also returns the matching auth.Config.
package idp
