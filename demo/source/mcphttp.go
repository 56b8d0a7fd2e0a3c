package source

import (
	"context"
	"net/http"
	"strings"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/das-ask/ask/auth"
)

// The keys of the identity in the request's TokenInfo.Extra.
const (
	extraTenant = "ask/tenant"
	extraOID    = "ask/oid"
)

// sessionTimeout closes MCP sessions whose client went away without ending them.
const sessionTimeout = 30 * time.Minute

// mcpHandler is the MCP endpoint behind two guards. auth.ResourceMiddleware validates the bearer
// of every HTTP request with the shared DAS_* settings and answers 401 problem+json otherwise
// (403 for a token without a required scope), its WWW-Authenticate challenge naming the
// endpoint's protected resource metadata and the scope to ask for, as MCP's authorization rules
// ask. The SDK's bearer guard then hands the validated identity
// to the tool handlers (as the request's TokenInfo: UserID is the tenant and the oid together,
// Extra holds each) and pins each MCP session to the identity that opened it, so one user's
// session cannot be driven with another's token, nor with the same oid's of another tenant
// (until 2026-12-06 UserID was the oid alone: a token for alice of another tid used alice's session).
// An identity opens at most Options.MaxSessionsPerIdentity sessions (sessionCap).
func (s *Source) mcpHandler() http.Handler {
	streamable := mcp.NewStreamableHTTPHandler(
		func(*http.Request) *mcp.Server { return s.mcp },
		&mcp.StreamableHTTPOptions{Logger: s.sdkLog(), SessionTimeout: sessionTimeout},
	)
	fromContext := func(_ context.Context, _ string, r *http.Request) (*sdkauth.TokenInfo, error) {
		id, ok := auth.FromContext(r.Context())
		if !ok || id.OID == "" {
			return nil, sdkauth.ErrInvalidToken
		}
		// Expiry was checked by the Validator (with the configured leeway); the identity does
		// not carry it, so the SDK's own expiry check is switched off below.
		who := identity{tenant: id.Tenant, oid: id.OID}
		return &sdkauth.TokenInfo{UserID: who.key(), Scopes: id.Scopes,
			Extra: map[string]any{extraTenant: who.tenant, extraOID: who.oid}}, nil
	}
	pin := sdkauth.RequireBearerToken(fromContext, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	return auth.ResourceMiddleware(s.auth, auth.ResourceOptions{
		MetadataURL: func(r *http.Request) string { return metadataURL(s.resource(r)) },
		Scope:       strings.Join(s.scopes, " "),
	}, pin(newSessionCap(s.maxSessions, s.mcp).handler(streamable)))
}
