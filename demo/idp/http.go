package idp

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

const (
	jwksPath      = "/.well-known/jwks.json"
	discoveryPath = "/.well-known/openid-configuration"
	asMetaPath    = "/.well-known/oauth-authorization-server"
	tokenPath     = "/token"
	maxTokenBody  = 16 << 10
)

// Handler serves the JWKS, the authorization server metadata, OIDC discovery and POST /token
// (see the package doc).
func (p *IdP) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+jwksPath, p.serveJWKS)
	mux.HandleFunc("GET "+asMetaPath, p.serveASMetadata)
	mux.HandleFunc("GET "+discoveryPath, p.serveDiscovery)
	mux.HandleFunc("POST "+tokenPath, p.serveToken)
	return mux
}

func (p *IdP) serveJWKS(w http.ResponseWriter, r *http.Request) {
	b, err := p.JWKS(r.Context())
	if err != nil {
		p.log.LogAttrs(r.Context(), slog.LevelError, "idp: JWKS failed", slog.Any("error", err))
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "max-age=60")
	_, _ = w.Write(b)
}

// asMetadata is what the IdP is as an OAuth 2.0 authorization server (RFC 8414 §2), and no more:
// a token endpoint with its own grant (POST /token, no client authentication) and no
// authorization endpoint, so no response type.
func (p *IdP) asMetadata() map[string]any {
	return map[string]any{
		"issuer":                                p.issuer,
		"jwks_uri":                              p.issuer + jwksPath,
		"token_endpoint":                        p.issuer + tokenPath,
		"response_types_supported":              []string{},
		"token_endpoint_auth_methods_supported": []string{"none"},
		"grant_types_supported":                 []string{"urn:das:dev:mint"},
		"scopes_supported":                      []string{DefaultScope},
	}
}

// serveASMetadata serves OAuth 2.0 Authorization Server Metadata (RFC 8414), the first document
// an MCP client looks for at the issuer a protected resource's metadata names.
func (p *IdP) serveASMetadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, p.asMetadata())
}

// serveDiscovery serves OIDC discovery: the authorization server metadata and the OIDC fields.
func (p *IdP) serveDiscovery(w http.ResponseWriter, _ *http.Request) {
	d := p.asMetadata()
	d["subject_types_supported"] = []string{"public"}
	d["id_token_signing_alg_values_supported"] = algs
	d["claims_supported"] = []string{"iss", "sub", "aud", "exp", "iat", "nbf", "jti", "oid", "tid", "scope"}
	writeJSON(w, http.StatusOK, d)
}

// LocalRequest reports whether r comes from a loopback peer and names a loopback host: the
// guard of every dev endpoint that hands out identities or shows what identities did (the dev
// UI's sign-in, the demo source's /audit, the llm-stub's request log, the dev webhook sink's
// list), so that neither the network nor a web page that DNS rebinding brought to loopback
// reaches them.
func LocalRequest(r *http.Request) bool {
	return LoopbackAddr(r.RemoteAddr) && LoopbackHost(r.Host)
}

// LoopbackAddr reports whether a RemoteAddr ("host:port") is a loopback address. With
// LoopbackHost it guards an endpoint that hands out identities, here and in the dev UI's sign-in:
// the peer address is what counts, since anyone can send forwarding headers.
func LoopbackAddr(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// LoopbackHost reports whether a Host header names loopback: localhost or a loopback IP. A
// loopback caller whose request names another host may be a browser page that rebound its DNS
// name to 127.0.0.1, and must not read a minted token.
func LoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
