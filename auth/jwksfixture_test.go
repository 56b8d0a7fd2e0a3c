package auth_test

import (
	"crypto/rsa"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/das-ask/ask/auth"
)

// rs256Validator returns a validator for RS256 tokens whose issuer publishes jwks, a JWKS the
// test built key by key (markings, sizes) rather than one the fake IdP would publish.
func rs256Validator(tb testing.TB, jwks ...jwkset.JWK) *auth.Validator {
	tb.Helper()
	set := jwkset.NewMemoryStorage()
	for _, jwk := range jwks {
		if err := set.KeyWrite(tb.Context(), jwk); err != nil {
			tb.Fatal(err)
		}
	}
	raw, err := set.JSONPublic(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	tr := &handlerTransport{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(raw)
	})}
	v, err := auth.New(tb.Context(), auth.Config{
		JWKSURL: localIssuerURL + "/.well-known/jwks.json", Issuer: localIssuerURL,
		Audience: "das", RequiredScope: "das", Algorithms: []string{"RS256"},
	}, auth.Options{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// rs256JWK is key's public half as a JWK for RS256 under kid, with meta's use and key_ops.
func rs256JWK(tb testing.TB, key *rsa.PrivateKey, kid string, meta jwkset.JWKMetadataOptions) jwkset.JWK {
	tb.Helper()
	meta.ALG, meta.KID = jwkset.AlgRS256, kid
	jwk, err := jwkset.NewJWKFromKey(key.Public(), jwkset.JWKOptions{Metadata: meta})
	if err != nil {
		tb.Fatal(err)
	}
	return jwk
}

// checkRS256 signs a token for alice, good for an hour, with key under kid, and checks that v
// accepts it (want "") or refuses it as invalid_token with the description want.
func checkRS256(t *testing.T, v *auth.Validator, key *rsa.PrivateKey, kid, want string) {
	t.Helper()
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iss": localIssuerURL, "aud": "das", "scope": "das", "oid": "alice",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	id, err := v.Authenticate(t.Context(), s)
	if want == "" {
		if err != nil || id.OID != "alice" {
			t.Fatalf("Authenticate = %+v, %v; want alice accepted", id, err)
		}
		return
	}
	var e *auth.Error
	if !errors.As(err, &e) {
		t.Fatalf("Authenticate = %+v, %v; want an *auth.Error", id, err)
	}
	if got, want := e.Code+"/"+e.Description, auth.CodeInvalidToken+"/"+want; got != want {
		t.Fatalf("error = %q, want %q", got, want)
	}
}
