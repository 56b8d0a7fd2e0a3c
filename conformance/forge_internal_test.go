package conformance

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

func TestForgeKeepsHeaderAndClaimsButNotTheSignature(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		method jwt.SigningMethod
		sign   any
		verify any
	}{
		{jwt.SigningMethodRS256, rsaKey, &rsaKey.PublicKey},
		{jwt.SigningMethodES256, ecKey, &ecKey.PublicKey},
	} {
		t.Run(tt.method.Alg(), func(t *testing.T) {
			tok := jwt.NewWithClaims(tt.method, jwt.MapClaims{"oid": "alice", "aud": "das"})
			tok.Header["kid"] = "k1"
			genuine, err := tok.SignedString(tt.sign)
			if err != nil {
				t.Fatal(err)
			}
			forged, err := forge(genuine)
			if err != nil {
				t.Fatal(err)
			}
			if forged == genuine {
				t.Fatal("forge returned the genuine token")
			}
			parsed, _, err := jwt.NewParser().ParseUnverified(forged, jwt.MapClaims{})
			if err != nil {
				t.Fatal(err)
			}
			if got := parsed.Header["kid"]; got != "k1" {
				t.Errorf("kid %v, want k1", got)
			}
			if got := parsed.Method.Alg(); got != tt.method.Alg() {
				t.Errorf("alg %s, want %s", got, tt.method.Alg())
			}
			if got := parsed.Claims.(jwt.MapClaims)["oid"]; got != "alice" {
				t.Errorf("oid %v, want alice", got)
			}
			_, err = jwt.Parse(forged, func(*jwt.Token) (any, error) { return tt.verify, nil })
			if err == nil {
				t.Error("the forged token verifies with the genuine key")
			}
		})
	}
}

func TestForgeNeedsAKid(t *testing.T) {
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	genuine, _ := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"oid": "a"}).SignedString(key)
	if _, err := forge(genuine); err == nil {
		t.Error("forged a token without a kid")
	}
}
