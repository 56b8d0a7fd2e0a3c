package conformance

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"

	"github.com/golang-jwt/jwt/v5"
)

// forge returns token re-signed with a fresh key (RSA, or P-256 for an ES256 token) that no issuer ever had: the same header
// (kid included, so a validator finds the genuine key and must notice the signature does not
// match it) and the same claims. It is what an attacker who has seen one token can make.
func forge(token string) (string, error) {
	parsed, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		return "", fmt.Errorf("forge: parse: %w", err)
	}
	var (
		method jwt.SigningMethod = jwt.SigningMethodRS256
		key    any
	)
	if parsed.Method.Alg() == jwt.SigningMethodES256.Alg() {
		method = jwt.SigningMethodES256
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	} else {
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		return "", fmt.Errorf("forge: key: %w", err)
	}
	forged := jwt.NewWithClaims(method, parsed.Claims)
	for k, v := range parsed.Header {
		if k != "alg" {
			forged.Header[k] = v
		}
	}
	if _, ok := forged.Header["kid"]; !ok {
		return "", errors.New("forge: the token names no kid")
	}
	s, err := forged.SignedString(key)
	if err != nil {
		return "", fmt.Errorf("forge: sign: %w", err)
	}
	return s, nil
}
