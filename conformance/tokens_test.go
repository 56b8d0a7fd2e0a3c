package conformance_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
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
