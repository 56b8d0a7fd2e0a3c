package eval

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/das-ask/ask/demo/idp"
)

// Tokens hands out a bearer for each identity a set asks as. Safe for concurrent use.
type Tokens interface {
	Token(ctx context.Context, oid string) (string, error)
}

// FixedTokens are bearers handed in from outside, by identity.
type FixedTokens map[string]string

// Token implements Tokens.
func (f FixedTokens) Token(_ context.Context, oid string) (string, error) {
	t, ok := f[oid]
	if !ok {
		return "", fmt.Errorf("no token was given for identity %q (the set asks as it)", oid)
	}
	return t, nil
}

// IdPTokens mints a token per identity from a development identity provider (demo/idp's
// POST /token, loopback callers only) and reuses it for half the IdP's default lifetime, so a long
// run never sends an expiring token.
type IdPTokens struct {
	// URL is the identity provider's root, e.g. http://127.0.0.1:8090.
	URL string
	// HTTPClient makes the mint calls; nil means http.DefaultClient.
	HTTPClient *http.Client

	mu    sync.Mutex
	cache map[string]minted
}

type minted struct {
	token string
	at    time.Time
}

// Token implements Tokens.
func (t *IdPTokens) Token(ctx context.Context, oid string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m, ok := t.cache[oid]; ok && time.Since(m.at) < idp.DefaultTTL/2 {
		return m.token, nil
	}
	tok, err := idp.RequestToken(ctx, t.HTTPClient, t.URL, idp.TokenRequest{OID: oid})
	if err != nil {
		return "", err
	}
	if t.cache == nil {
		t.cache = map[string]minted{}
	}
	t.cache[oid] = minted{token: tok, at: time.Now()}
	return tok, nil
}
