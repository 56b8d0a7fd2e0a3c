// Package idptest starts a development identity provider (package demo/idp) on httptest for
// tests in any package, and gives the auth.Config that accepts its tokens.
package idptest

import (
	"net/http/httptest"
	"testing"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
)

// Server is an IdP listening on a loopback httptest server.
type Server struct {
	*idp.IdP
	// HTTP is the server; its URL is the issuer.
	HTTP *httptest.Server
}

// Start starts an IdP with keys in memory; it is closed when tb ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return StartWith(tb, idp.Options{})
}

// StartWith starts an IdP with opts; opts.Issuer is replaced by the server's URL. It is closed
// when tb ends.
func StartWith(tb testing.TB, opts idp.Options) *Server {
	tb.Helper()
	srv := httptest.NewUnstartedServer(nil)
	opts.Issuer = "http://" + srv.Listener.Addr().String()
	p, err := idp.New(opts)
	if err != nil {
		srv.Close()
		tb.Fatalf("idptest: %v", err)
	}
	srv.Config.Handler = p.Handler()
	srv.Start()
	tb.Cleanup(srv.Close)
	return &Server{IdP: p, HTTP: srv}
}

// Config returns the auth settings that accept this IdP's default tokens: its issuer and
// JWKS, audience and required scope `das`, RS256 and ES256.
func (s *Server) Config() auth.Config {
	return auth.Config{
		JWKSURL:       s.JWKSURL(),
		Issuer:        s.Issuer(),
		Audience:      idp.DefaultAudience,
		RequiredScope: idp.DefaultScope,
		Algorithms:    []string{idp.RS256, idp.ES256},
	}
}

// Token mints a default token for oid (audience and scope `das`, one hour, RS256), failing tb
// on error.
func (s *Server) Token(tb testing.TB, oid string) string {
	tb.Helper()
	t, err := s.Mint(idp.Claims{OID: oid})
	if err != nil {
		tb.Fatalf("idptest: mint: %v", err)
	}
	return t
}
