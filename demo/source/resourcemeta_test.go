package source_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/idp/idptest"
	"github.com/das-ask/ask/demo/source"
)

// initialize POSTs an MCP initialize to url with the Authorization header auth ("" for none).
func initialize(t *testing.T, srv *httptest.Server, url, authz string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url,
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// bearerChallenge returns the parameters of resp's one Bearer challenge.
func bearerChallenge(t *testing.T, resp *http.Response) map[string]string {
	t.Helper()
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil || len(cs) != 1 || cs[0].Scheme != "bearer" {
		t.Fatalf("WWW-Authenticate %q: %v, want one Bearer challenge", resp.Header.Values("WWW-Authenticate"), err)
	}
	return cs[0].Params
}

// The source is an MCP server protected by bearer tokens, so it follows MCP's authorization
// rules (2025-06-18 and 2025-11-25, "Authorization"): it publishes OAuth 2.0 Protected Resource
// Metadata (RFC 9728) naming the issuer whose tokens it takes, every 401 points to it
// (resource_metadata) and names the scope to ask for, a token lacking that scope is a 403
// insufficient_scope (RFC 6750 §3.1), and a token is taken from the Authorization header only.
// Until 2026-12-06 the source published no metadata, its challenges were a bare
// `Bearer realm="das"` (with error= when a token was sent), and a token without the scope was a 401.
func TestProtectedResourceMetadata(t *testing.T) {
	p := idptest.Start(t)
	v, err := auth.New(t.Context(), p.Config(), auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, srv := start(t, source.Options{Authenticator: v})
	resource := srv.URL + "/mcp"
	metadataURL := srv.URL + "/.well-known/oauth-protected-resource/mcp"

	mint := func(c idp.Claims) string {
		tok, err := p.Mint(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for _, tt := range []struct {
		name, authz string
		status      int
		code        string // the challenge's error; "" for none
	}{
		{"no token", "", http.StatusUnauthorized, ""},
		{"garbage", "Bearer not-a-jwt", http.StatusUnauthorized, auth.CodeInvalidToken},
		{"expired", "Bearer " + mint(idp.Claims{OID: "alice", Expired: true}), http.StatusUnauthorized, auth.CodeInvalidToken},
		{"another audience", "Bearer " + mint(idp.Claims{OID: "alice", Audience: resource}), http.StatusUnauthorized, auth.CodeInvalidToken},
		{"without the scope", "Bearer " + mint(idp.Claims{OID: "alice", Scope: "other"}), http.StatusForbidden, auth.CodeInsufficientScope},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := initialize(t, srv, resource, tt.authz)
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
			}
			c := bearerChallenge(t, resp)
			if c["resource_metadata"] != metadataURL || c["scope"] != "das" || c["error"] != tt.code {
				t.Errorf("challenge %v, want resource_metadata=%s, scope=das, error=%q", c, metadataURL, tt.code)
			}
		})
	}

	t.Run("a token in the query string is not taken", func(t *testing.T) {
		resp := initialize(t, srv, resource+"?access_token="+p.Token(t, "alice"), "")
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("status %d, want 401", resp.StatusCode)
		}
	})

	t.Run("the metadata is public and cacheable", func(t *testing.T) {
		resp, err := srv.Client().Get(metadataURL)
		if err != nil {
			t.Fatal(err)
		}
		var m oauthex.ProtectedResourceMetadata
		err = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("GET %s without a bearer: %s, %v", metadataURL, resp.Status, err)
		}
		if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=") || strings.Contains(cc, "no-store") {
			t.Errorf("Cache-Control %q, want a max-age", cc)
		}
		if m.Resource != resource || !slices.Equal(m.AuthorizationServers, []string{p.Issuer()}) ||
			!slices.Equal(m.BearerMethodsSupported, []string{"header"}) || !slices.Equal(m.ScopesSupported, []string{"das"}) {
			t.Errorf("metadata %+v", m)
		}
		// The SDK's own client reads it as an MCP client does (RFC 9728 §3.3: its resource is
		// the URL the client asked).
		if _, err := oauthex.GetProtectedResourceMetadata(t.Context(), metadataURL, resource, srv.Client()); err != nil {
			t.Error(err)
		}
	})

	// Behind a gateway that mounts the source under a prefix, Options.ResourceURL says the URL
	// clients use: the metadata names it, and the challenge points to its well-known URL there
	// (RFC 9728 §3.1), which the source also serves.
	t.Run("behind a path prefix", func(t *testing.T) {
		const public = "https://gw.example/warehouse/mcp"
		_, srv := start(t, source.Options{Authenticator: v, ResourceURL: public})
		c := bearerChallenge(t, initialize(t, srv, srv.URL+"/mcp", ""))
		if want := "https://gw.example/.well-known/oauth-protected-resource/warehouse/mcp"; c["resource_metadata"] != want {
			t.Errorf("resource_metadata %q, want %q", c["resource_metadata"], want)
		}
		for _, path := range []string{"/.well-known/oauth-protected-resource/warehouse/mcp", "/.well-known/oauth-protected-resource/mcp"} {
			resp, err := srv.Client().Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			var m oauthex.ProtectedResourceMetadata
			err = json.NewDecoder(resp.Body).Decode(&m)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || err != nil || m.Resource != public {
				t.Errorf("GET %s: %s, %v, resource %q, want %q", path, resp.Status, err, m.Resource, public)
			}
		}
	})
}
