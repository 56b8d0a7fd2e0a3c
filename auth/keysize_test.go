package auth_test

import (
	"crypto/rand"
	"crypto/rsa"
	"testing"

	"github.com/MicahParks/jwkset"
)

// RFC 7518 §3.3: RS256 needs an RSA key of 2048 bits or more. Neither jwkset nor golang-jwt
// checks the size (and Go refuses only keys under 1024 bits), so a token signed with a 1024-bit
// key the issuer published was accepted; whoever factors such a key (within reach of a
// well-funded attacker) could then sign as anyone. The weak key is refused whatever the JWKS
// says, the strong one beside it still works.
func TestShortRSAKeyRefused(t *testing.T) {
	keys := map[string]*rsa.PrivateKey{}
	var jwks []jwkset.JWK
	for kid, bits := range map[string]int{"rsa-1024": 1024, "rsa-2047": 2047, "rsa-2048": 2048} {
		k, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			t.Fatal(err)
		}
		keys[kid] = k
		jwks = append(jwks, rs256JWK(t, k, kid, jwkset.JWKMetadataOptions{USE: jwkset.UseSig}))
	}
	v := rs256Validator(t, jwks...)
	for _, tt := range []struct {
		kid  string
		want string // "" = accepted
	}{
		{kid: "rsa-2048"},
		{kid: "rsa-2047", want: "signing key is too short: RSA keys need at least 2048 bits"},
		{kid: "rsa-1024", want: "signing key is too short: RSA keys need at least 2048 bits"},
	} {
		t.Run(tt.kid, func(t *testing.T) { checkRS256(t, v, keys[tt.kid], tt.kid, tt.want) })
	}
}
