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

// RFC 7518 §3.3: RS256 needs an RSA key of 2048 bits or more. Neither jwkset nor golang-jwt
// checks the size (and Go refuses only keys under 1024 bits), so a token signed with a 1024-bit
// key the issuer published was accepted; whoever factors such a key (within reach of a
// well-funded attacker) could then sign as anyone. The weak key is refused whatever the JWKS
// says, the strong one beside it still works.
func TestShortRSAKeyRefused(t *testing.T) {
	keys := map[string]*rsa.PrivateKey{}
	set := jwkset.NewMemoryStorage()
	for kid, bits := range map[string]int{"rsa-1024": 1024, "rsa-2047": 2047, "rsa-2048": 2048} {
		k, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			t.Fatal(err)
		}
		keys[kid] = k
		jwk, err := jwkset.NewJWKFromKey(k.Public(), jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{ALG: jwkset.AlgRS256, KID: kid, USE: jwkset.UseSig},
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
	for _, tt := range []struct {
		kid  string
		want string // "" = accepted
	}{
		{kid: "rsa-2048"},
		{kid: "rsa-2047", want: "signing key is too short: RSA keys need at least 2048 bits"},
		{kid: "rsa-1024", want: "signing key is too short: RSA keys need at least 2048 bits"},
	} {
		t.Run(tt.kid, func(t *testing.T) {
			now := time.Now()
			tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
				"iss": localIssuerURL, "aud": "das", "scope": "das", "oid": "alice",
				"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
			})
			tok.Header["kid"] = tt.kid
			s, err := tok.SignedString(keys[tt.kid])
			if err != nil {
				t.Fatal(err)
			}
			id, err := v.Authenticate(t.Context(), s)
			if tt.want == "" {
				if err != nil || id.OID != "alice" {
					t.Fatalf("Authenticate = %+v, %v; want alice accepted", id, err)
				}
				return
			}
			var e *auth.Error
			if !errors.As(err, &e) {
				t.Fatalf("Authenticate = %+v, %v; want an *auth.Error", id, err)
			}
			if got, want := e.Code+"/"+e.Description, auth.CodeInvalidToken+"/"+tt.want; got != want {
				t.Fatalf("error = %q, want %q", got, want)
			}
		})
	}
}
