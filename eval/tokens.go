package eval

import (
	"context"
	"errors"
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
// run never sends an expiring token. An IdP that does not answer within Timeout is an error that
// says so, not a run waiting for ever.
type IdPTokens struct {
	// URL is the identity provider's root, e.g. http://127.0.0.1:8090.
	URL string
	// HTTPClient makes the mint calls; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Timeout bounds one mint. 0 means DefaultMintTimeout.
	Timeout time.Duration

	mu    sync.Mutex
	cache map[string]minted
}

// DefaultMintTimeout is IdPTokens.Timeout's default: the dev IdP answers in milliseconds.
const DefaultMintTimeout = 10 * time.Second

type minted struct {
	token string
	at    time.Time
}

var errMintTimeout = errors.New("mint timeout")

// Token implements Tokens.
func (t *IdPTokens) Token(ctx context.Context, oid string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m, ok := t.cache[oid]; ok && time.Since(m.at) < idp.DefaultTTL/2 {
		return m.token, nil
	}
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = DefaultMintTimeout
	}
	mctx, cancel := context.WithTimeoutCause(ctx, timeout, errMintTimeout)
	defer cancel()
	tok, err := idp.RequestToken(mctx, t.HTTPClient, t.URL, idp.TokenRequest{OID: oid})
	if err != nil {
		if ctx.Err() == nil && errors.Is(context.Cause(mctx), errMintTimeout) {
			return "", fmt.Errorf("the dev identity provider at %s did not answer within %s", t.URL, timeout)
		}
		return "", err
	}
	if t.cache == nil {
		t.cache = map[string]minted{}
	}
	t.cache[oid] = minted{token: tok, at: time.Now()}
	return tok, nil
}
