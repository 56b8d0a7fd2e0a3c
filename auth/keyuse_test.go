package auth_test

import (
	"crypto/rand"
	"crypto/rsa"
	"testing"

	"github.com/MicahParks/jwkset"
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
	var jwks []jwkset.JWK
	for _, c := range cases {
		jwks = append(jwks, rs256JWK(t, priv, c.kid, jwkset.JWKMetadataOptions{USE: c.use, KEYOPS: c.ops}))
	}
	v := rs256Validator(t, jwks...)
	for _, c := range cases {
		t.Run(c.kid, func(t *testing.T) { checkRS256(t, v, priv, c.kid, c.want) })
	}
}
