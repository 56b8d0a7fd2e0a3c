package conformance_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/das-ask/ask/conformance"
	"github.com/das-ask/ask/demo/idp/idptest"
)

// An OtherTenant token is A's oid with the tid OtherTenantID. An identity provider that ignores
// the tid it is asked for would hand back A's own token, and the check would fail a target that
// keeps tenants apart: that is ErrCannotMint (the check skips), as it is for fixed tokens.
func TestOtherTenantToken(t *testing.T) {
	s := idptest.Start(t)
	tok, err := conformance.IdPTokens{URL: s.HTTP.URL}.Token(t.Context(), conformance.A, conformance.OtherTenant)
	if err != nil {
		t.Fatal(err)
	}
	c := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(tok, c); err != nil {
		t.Fatal(err)
	}
	if c["oid"] != "alice" || c["tid"] != conformance.OtherTenantID {
		t.Fatalf("claims %v: want oid alice, tid %s", c, conformance.OtherTenantID)
	}

	// An IdP of before tid: it mints the form's oid and ignores the rest.
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"oid":"alice","aud":"das"}`))
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"eyJhbGciOiJSUzI1NiJ9.` + payload + `.c2ln","token_type":"Bearer"}`))
	}))
	defer old.Close()
	if _, err := (conformance.IdPTokens{URL: old.URL}).Token(t.Context(), conformance.A, conformance.OtherTenant); !errors.Is(err, conformance.ErrCannotMint) || strings.Contains(err.Error(), "eyJ") {
		t.Fatalf("an IdP that mints no tid: %v, want ErrCannotMint (and no token in the error)", err)
	}
	if _, err := (conformance.FixedTokens{TokenA: "a", TokenB: "b"}).Token(t.Context(), conformance.A, conformance.OtherTenant); !errors.Is(err, conformance.ErrCannotMint) {
		t.Fatalf("fixed tokens: %v, want ErrCannotMint", err)
	}
}

// Fixed tokens that have expired are said once, before any check runs (Run's error: the suite
// could not run), not as sixty checks failing on their 401 one by one. An opaque token, or a
// JWT without exp or still valid, runs as given.
func TestExpiredFixedTokensStopTheSuite(t *testing.T) {
	jwtWith := func(payload string) string {
		return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".c2ln"
	}
	expired, valid := jwtWith(`{"oid":"bob","exp":1000000000}`), jwtWith(`{"oid":"alice","exp":4102444800}`)
	_, err := conformance.Run(t.Context(), conformance.Config{BaseURL: "http://127.0.0.1:1", Tokens: conformance.FixedTokens{TokenA: valid, TokenB: expired}})
	if err == nil || !strings.Contains(err.Error(), "the token of identity B expired at 2001-09-09T01:46:40Z") || strings.Contains(err.Error(), "identity A") {
		t.Fatalf("Run: %v, want B's token named as expired, and A's not", err)
	}
	_, err = conformance.Run(t.Context(), conformance.Config{BaseURL: "http://127.0.0.1:1", LimitsURL: "http://127.0.0.1:2",
		Tokens: conformance.FixedTokens{TokenA: valid, TokenB: valid}, LimitsTokens: conformance.FixedTokens{TokenA: expired, TokenB: "opaque"}})
	if err == nil || !strings.Contains(err.Error(), "the token of identity A expired") || !strings.Contains(err.Error(), "(LimitsTokens, for LimitsURL)") {
		t.Fatalf("Run with an expired limits token: %v, want it named", err)
	}
	for _, tok := range []string{"opaque", jwtWith(`{"oid":"alice"}`), jwtWith(`{"oid":"alice","exp":"soon"}`), valid} {
		rep, err := conformance.Run(t.Context(), conformance.Config{BaseURL: "http://127.0.0.1:1", Tokens: conformance.FixedTokens{TokenA: tok, TokenB: tok},
			Only: regexp.MustCompile(`^auth\.no-bearer$`)})
		if err != nil || len(rep.Results) != 1 {
			t.Errorf("Run with %q: %v, %d results; want the suite to run", tok, err, len(rep.Results))
		}
	}
}
