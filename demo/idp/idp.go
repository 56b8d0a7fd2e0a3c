package idp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/MicahParks/jwkset"

	"github.com/das-ask/ask/internal/httpurl"
)

// DefaultIssuer is the issuer of the dev stack.
const DefaultIssuer = "http://127.0.0.1:8090"

// Options configure an IdP; zero values mean defaults.
type Options struct {
	// Issuer is the `iss` of every token and the base of the discovery URLs; "" means
	// DefaultIssuer. It must be the URL the IdP is reached at.
	Issuer string
	// StateDir keeps the signing keys across restarts (created if missing, files mode 0600);
	// "" keeps them in memory only.
	StateDir string
	// Logger receives one line per minted token (oid, alg, kid, expiry; never the token); nil
	// discards.
	Logger *slog.Logger
}

// IdP is a development identity provider. It is safe for concurrent use.
type IdP struct {
	issuer     string
	issuerHost string // host[:port] of issuer
	dir        string
	log        *slog.Logger

	mu      sync.Mutex
	current map[string]*signingKey // by alg: the key that signs
	retired []*signingKey          // still published, so tokens they signed stay valid
	forgers map[string]*signingKey // by alg: unpublished keys for Forge
}

// New returns an IdP with one RS256 and one ES256 signing key, loaded from Options.StateDir
// when they exist there.
func New(opts Options) (*IdP, error) {
	issuer := strings.TrimRight(opts.Issuer, "/")
	if issuer == "" {
		issuer = DefaultIssuer
	}
	u, err := httpurl.Parse(issuer)
	if err != nil {
		return nil, fmt.Errorf("idp: issuer %q: want an absolute http(s) URL", opts.Issuer)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &IdP{issuer: issuer, issuerHost: u.Host, dir: opts.StateDir, log: log, current: map[string]*signingKey{}, forgers: map[string]*signingKey{}}
	for _, alg := range algs {
		k, err := loadOrCreate(opts.StateDir, alg)
		if err != nil {
			return nil, fmt.Errorf("idp: %s key: %w", alg, err)
		}
		p.current[alg] = k
	}
	return p, nil
}

// Issuer returns the `iss` of the tokens this IdP mints.
func (p *IdP) Issuer() string { return p.issuer }

// JWKSURL returns where this IdP publishes its keys.
func (p *IdP) JWKSURL() string { return p.issuer + jwksPath }

// KeyID returns the kid of the key currently signing alg ("" for an unsupported alg).
func (p *IdP) KeyID(alg string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if k := p.current[normAlg(alg)]; k != nil {
		return k.kid
	}
	return ""
}

// Rotate replaces the key signing alg with a fresh one (persisted when there is a StateDir).
// The old key stays published until the IdP restarts, so tokens it signed stay valid; a
// validator sees the new kid on the next token and refetches the JWKS.
func (p *IdP) Rotate(alg string) error {
	alg = normAlg(alg)
	priv, err := generate(alg)
	if err != nil {
		return fmt.Errorf("idp: rotate: %w", err)
	}
	k, err := newSigningKey(alg, priv)
	if err != nil {
		return fmt.Errorf("idp: rotate: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dir != "" {
		if err := persist(p.dir, alg, priv); err != nil {
			return fmt.Errorf("idp: rotate: %w", err)
		}
	}
	p.retired = append(p.retired, p.current[alg])
	p.current[alg] = k
	return nil
}

// JWKS returns the published key set as JSON: public keys only, each with kid, alg and use=sig.
func (p *IdP) JWKS(ctx context.Context) (json.RawMessage, error) {
	p.mu.Lock()
	keys := append([]*signingKey(nil), p.retired...)
	for _, alg := range algs {
		keys = append(keys, p.current[alg])
	}
	p.mu.Unlock()
	set := jwkset.NewMemoryStorage()
	for _, k := range keys {
		jwk, err := jwkset.NewJWKFromKey(k.priv.Public(), jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{ALG: jwkset.ALG(k.alg), KID: k.kid, USE: jwkset.UseSig},
		})
		if err != nil {
			return nil, fmt.Errorf("idp: JWK for %s: %w", k.kid, err)
		}
		if err := set.KeyWrite(ctx, jwk); err != nil {
			return nil, err
		}
	}
	return set.JSONPublic(ctx)
}

// signer returns the current key for alg, or the unpublished forging key with the same kid.
func (p *IdP) signer(alg string, forged bool) (*signingKey, error) {
	alg = normAlg(alg)
	p.mu.Lock()
	defer p.mu.Unlock()
	cur, ok := p.current[alg]
	if !ok {
		return nil, errors.New("alg must be RS256 or ES256")
	}
	if !forged {
		return cur, nil
	}
	f := p.forgers[alg]
	if f == nil || f.kid != cur.kid {
		priv, err := generate(alg)
		if err != nil {
			return nil, err
		}
		f, err = newSigningKey(alg, priv)
		if err != nil {
			return nil, err
		}
		f.kid = cur.kid // the lie: a published kid on a key nobody published
		p.forgers[alg] = f
	}
	return f, nil
}

func normAlg(alg string) string {
	if alg == "" {
		return RS256
	}
	return strings.ToUpper(alg)
}
