package idp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Token defaults.
const (
	DefaultAudience = "das"
	DefaultScope    = "das"
	DefaultTTL      = time.Hour
	// MaxTTL bounds Claims.TTL: a dev token that outlives a working day is a mistake.
	MaxTTL = 24 * time.Hour
	// expiredAgo is how far in the past an Expired token's exp lies: well beyond any leeway.
	expiredAgo = 10 * time.Minute
)

// Claims describe a token to mint; zero values mean defaults.
type Claims struct {
	// OID is the identity (`oid`, also `sub`). Mint omits the claim when it is empty (to test
	// validators); POST /token requires it.
	OID string
	// TID is the tenant (`tid`): an oid is unique only within its tenant, so the same OID
	// under another TID, or under none, is another identity to the ask service. "" omits it.
	TID string
	// Audience is `aud`; "" means DefaultAudience.
	Audience string
	// Scope is `scope`, space-separated; "" means DefaultScope.
	Scope string
	// TTL is how long the token is valid; 0 means DefaultTTL. At most MaxTTL.
	TTL time.Duration
	// Expired mints a token whose exp is already 10 minutes past (iat and nbf one TTL earlier).
	Expired bool
	// Alg is RS256 or ES256; "" means RS256.
	Alg string

	// Issuer overrides `iss` (to test validators); "" means the IdP's issuer.
	Issuer string
	// NotBefore sets `nbf`; zero means the issue time.
	NotBefore time.Time
	// Extra sets or overrides claims after all others; a nil value removes the claim.
	Extra map[string]any
}

// Mint returns a signed token for c, signed by the key currently published for c.Alg.
func (p *IdP) Mint(c Claims) (string, error) { return p.sign(c, false) }

// Forge returns a token exactly like Mint would, but signed with a key this IdP never published
// while naming the published kid: what an attacker who knows the kid can make. Every validator
// must reject it. For tests.
func (p *IdP) Forge(c Claims) (string, error) { return p.sign(c, true) }

func (p *IdP) sign(c Claims, forged bool) (string, error) {
	if c.TTL < 0 || c.TTL > MaxTTL {
		return "", fmt.Errorf("idp: ttl %s: want between 0 and %s", c.TTL, MaxTTL)
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	key, err := p.signer(c.Alg, forged)
	if err != nil {
		return "", fmt.Errorf("idp: %w", err)
	}
	now := time.Now()
	exp := now.Add(c.TTL)
	if c.Expired {
		exp = now.Add(-expiredAgo)
	}
	iat := exp.Add(-c.TTL)
	nbf := iat
	if !c.NotBefore.IsZero() {
		nbf = c.NotBefore
	}
	claims := jwt.MapClaims{
		"iss":   or(c.Issuer, p.issuer),
		"aud":   or(c.Audience, DefaultAudience),
		"scope": or(c.Scope, DefaultScope),
		"iat":   iat.Unix(),
		"nbf":   nbf.Unix(),
		"exp":   exp.Unix(),
		"jti":   newJTI(),
	}
	if c.OID != "" {
		claims["oid"] = c.OID
		claims["sub"] = c.OID
	}
	if c.TID != "" {
		claims["tid"] = c.TID
	}
	for k, v := range c.Extra {
		if v == nil {
			delete(claims, k)
		} else {
			claims[k] = v
		}
	}
	t := jwt.NewWithClaims(key.method, claims)
	t.Header["kid"] = key.kid
	s, err := t.SignedString(key.priv)
	if err != nil {
		return "", fmt.Errorf("idp: sign: %w", err)
	}
	if !forged {
		p.log.LogAttrs(context.Background(), slog.LevelInfo, "idp: token minted",
			slog.String("oid", c.OID), slog.String("tid", c.TID), slog.String("alg", key.alg), slog.String("kid", key.kid), slog.Time("exp", exp))
	}
	return s, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func newJTI() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
