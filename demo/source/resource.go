package source

import (
	"errors"
	"net/http"
	"net/url"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/das-ask/ask/internal/httpurl"
)

// wellKnownPRM is the well-known path of OAuth 2.0 Protected Resource Metadata (RFC 9728 §3).
const wellKnownPRM = "/.well-known/oauth-protected-resource"

// metadataMaxAge is how long a client or cache may keep the metadata: it changes only when the
// source is reconfigured.
const metadataMaxAge = "3600"

// tokenSettings is what an Authenticator may say of the tokens it accepts; *auth.Validator
// does. Options.AuthorizationServers and Options.Scopes default to it.
type tokenSettings interface {
	Issuer() string
	RequiredScopes() []string
}

// parseResourceURL checks Options.ResourceURL: an absolute http(s) URL with no query or
// fragment (RFC 9728 §1.2: a resource identifier).
func parseResourceURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, nil
	}
	u, err := httpurl.Parse(s)
	if err != nil || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, errors.New("source: Options.ResourceURL: " + ResourceURLWant)
	}
	return u, nil
}

// ResourceURLWant says what Options.ResourceURL must be, for a command's own message.
const ResourceURLWant = "want an absolute http(s) URL with no user, query or fragment, such as https://gw.example/warehouse/mcp"

// ResourceURLValid reports whether s is a valid Options.ResourceURL ("" included), for a
// command that checks its settings before it starts anything.
func ResourceURLValid(s string) bool {
	_, err := parseResourceURL(s)
	return err == nil
}

// resource returns the resource identifier of the MCP endpoint r reached: Options.ResourceURL,
// or else the URL r was sent to (its scheme and Host, path /mcp).
func (s *Source) resource(r *http.Request) *url.URL {
	if s.resourceURL != nil {
		return s.resourceURL
	}
	u := &url.URL{Scheme: "http", Host: r.Host, Path: "/mcp"}
	if r.TLS != nil {
		u.Scheme = "https"
	}
	return u
}

// metadataURL returns the URL of resource's metadata: its well-known URL (RFC 9728 §3.1) on the
// resource's origin.
func metadataURL(resource *url.URL) string {
	u := *resource
	u.Path, u.RawPath = metadataPath(resource), ""
	return u.String()
}

// metadataHandler serves the protected resource metadata (RFC 9728) of the MCP endpoint, public
// (no bearer) and cacheable, through the SDK's handler: the resource, the issuer whose tokens the
// source takes, the scopes a token must grant, and the Authorization header as the one way to
// send one. It answers at the well-known URL of /mcp and, when Options.ResourceURL has another
// path, at that path's well-known URL too, so that a gateway may pass either through.
func (s *Source) metadataHandler(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != wellKnownPRM+"/mcp" && (s.resourceURL == nil || r.URL.Path != metadataPath(s.resourceURL)) {
		http.NotFound(w, r)
		return
	}
	if r.Method == http.MethodGet {
		w.Header().Set("Cache-Control", "public, max-age="+metadataMaxAge)
	}
	sdkauth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               s.resource(r).String(),
		AuthorizationServers:   s.authServers,
		ScopesSupported:        s.scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "ask demo source",
	}).ServeHTTP(w, r)
}

// metadataPath is the path of resource's well-known metadata URL: the well-known path inserted
// before the resource's path, a path of "/" being none (RFC 9728 §3.1).
func metadataPath(resource *url.URL) string {
	if resource.Path == "/" {
		return wellKnownPRM
	}
	return wellKnownPRM + resource.Path
}
