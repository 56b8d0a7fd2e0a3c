package auth_test

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/das-ask/ask/auth"
)

// A key the JWKS publishes for something other than signatures never verifies one. RFC 7517
// says so two ways: `use` (§4.2: "sig" or "enc") and `key_ops` (§4.3: "verify" is the
// operation a signature check needs). `use: enc` was refused; a key marked `key_ops:
// ["encrypt"]` (or wrapKey, deriveKey, …) verified tokens as if it had no marking at all.
// A key with no marking, or with "verify" among its operations, still verifies.
func TestKeysNotForVerifyingAreRefused(t *testing.T) {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	const notForSignatures = "signing key is not published for verifying signatures"
	cases := []struct {
		kid  string
		use  jwkset.USE
		ops  []jwkset.KEYOPS
		want string // "" = accepted
	}{
		{kid: "unmarked"},
		{kid: "use-sig", use: jwkset.UseSig},
		{kid: "ops-verify", ops: []jwkset.KEYOPS{jwkset.KeyOpsVerify}},
		{kid: "ops-sign-verify", ops: []jwkset.KEYOPS{jwkset.KeyOpsSign, jwkset.KeyOpsVerify}},
		{kid: "use-enc", use: jwkset.UseEnc, want: notForSignatures},
		{kid: "ops-encrypt", ops: []jwkset.KEYOPS{jwkset.KeyOpsEncrypt}, want: notForSignatures},
		{kid: "ops-wrap", ops: []jwkset.KEYOPS{jwkset.KeyOpsWrapKey, jwkset.KeyOpsUnwrapKey}, want: notForSignatures},
		{kid: "ops-sign", ops: []jwkset.KEYOPS{jwkset.KeyOpsSign}, want: notForSignatures},
	}
	set := jwkset.NewMemoryStorage()
	for _, c := range cases {
		jwk, err := jwkset.NewJWKFromKey(priv.Public(), jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{ALG: jwkset.AlgRS256, KID: c.kid, USE: c.use, KEYOPS: c.ops},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := set.KeyWrite(t.Context(), jwk); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := set.JSONPublic(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tr := &handlerTransport{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(raw)
	})}
	v, err := auth.New(t.Context(), auth.Config{
		JWKSURL: localIssuerURL + "/.well-known/jwks.json", Issuer: localIssuerURL,
		Audience: "das", RequiredScope: "das", Algorithms: []string{"RS256"},
	}, auth.Options{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.kid, func(t *testing.T) {
			now := time.Now()
			tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
				"iss": localIssuerURL, "aud": "das", "scope": "das", "oid": "alice",
				"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
			})
			tok.Header["kid"] = c.kid
			s, err := tok.SignedString(priv)
			if err != nil {
				t.Fatal(err)
			}
			id, err := v.Authenticate(t.Context(), s)
			if c.want == "" {
				if err != nil || id.OID != "alice" {
					t.Fatalf("Authenticate = %+v, %v; want alice accepted", id, err)
				}
				return
			}
			var e *auth.Error
			if !errors.As(err, &e) {
				t.Fatalf("Authenticate = %+v, %v; want an *auth.Error", id, err)
			}
			if got, want := e.Code+"/"+e.Description, auth.CodeInvalidToken+"/"+c.want; got != want {
				t.Fatalf("error = %q, want %q", got, want)
			}
		})
	}
}
