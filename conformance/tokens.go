package conformance

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Identity names one of the two identities the suite asks as.
type Identity int

const (
	// A asks most questions (the demo's alice, who may read everything).
	A Identity = iota
	// B is the second identity: the one who must not see A's tickets, and who is refused
	// (the demo's bob).
	B
)

// TokenKind is the kind of bearer a check needs.
type TokenKind int

const (
	// Valid is a token the target must accept.
	Valid TokenKind = iota
	// Expired is a token whose exp lies in the past beyond any leeway.
	Expired
	// WrongAudience is a token minted for an audience other than the target's.
	WrongAudience
	// OtherTenant is a valid token for the same oid in another tenant (its `tid` claim
	// OtherTenantID): to the target, someone else, who must not see the identity's work.
	OtherTenant
)

// OtherTenantID is the `tid` of an OtherTenant token.
const OtherTenantID = "conformance-other-tenant"

// ErrCannotMint is returned by a TokenSource that cannot make a token of the requested kind; the
// checks that need it are skipped.
var ErrCannotMint = errors.New("conformance: this token source cannot make that kind of token")

// TokenSource hands out bearers for the suite's identities. Safe for concurrent use.
type TokenSource interface {
	// Token returns a bearer for who, of the given kind, or an error wrapping ErrCannotMint.
	Token(ctx context.Context, who Identity, kind TokenKind) (string, error)
}

// FixedTokens are two bearers handed in from outside. They can only be Valid: every other kind
// is ErrCannotMint, and the checks that need it are skipped.
type FixedTokens struct {
	TokenA, TokenB string
}

// Token implements TokenSource.
func (f FixedTokens) Token(_ context.Context, who Identity, kind TokenKind) (string, error) {
	if kind != Valid {
		return "", fmt.Errorf("fixed tokens: %w", ErrCannotMint)
	}
	if who == B {
		return f.TokenB, nil
	}
	return f.TokenA, nil
}

// expired names each token whose exp (read unverified: a JWT's payload; an opaque token has
// none) has passed at now. Every check would fail on its 401 one by one; the suite says so
// once, before it runs, and does not run.
func (f FixedTokens) expired(now time.Time) []error {
	var errs []error
	for _, t := range []struct {
		who   Identity
		token string
	}{{A, f.TokenA}, {B, f.TokenB}} {
		if exp, ok := payloadExp(t.token); ok && !now.Before(exp) {
			errs = append(errs, fmt.Errorf("conformance: the token of identity %s expired at %s: hand in a fresh one", t.who, exp.UTC().Format(time.RFC3339)))
		}
	}
	return errs
}

// IdPTokens mints every token the suite needs from a development identity provider's mint
// endpoint (POST {URL}/token with the form fields oid, tid, aud, scope, ttl_s, expired, alg,
// answered with {"access_token": ...}), which serves loopback callers only. An OtherTenant token
// whose payload does not carry the tid asked for (an IdP that ignores the field) is
// ErrCannotMint: it would be the identity's own token.
type IdPTokens struct {
	// URL is the identity provider's root, e.g. http://127.0.0.1:8090.
	URL string
	// OIDA and OIDB are the identities; "" means alice and bob.
	OIDA, OIDB string
	// Audience is the audience the target expects; "" means das.
	Audience string
	// Scope is the scope the target requires; "" means das.
	Scope string
	// HTTPClient makes the mint calls; nil means http.DefaultClient.
	HTTPClient *http.Client
}

// Token implements TokenSource.
func (p IdPTokens) Token(ctx context.Context, who Identity, kind TokenKind) (string, error) {
	oid := or(p.OIDA, "alice")
	if who == B {
		oid = or(p.OIDB, "bob")
	}
	aud := or(p.Audience, "das")
	form := url.Values{
		"oid":   {oid},
		"aud":   {aud},
		"scope": {or(p.Scope, "das")},
		"ttl_s": {strconv.Itoa(int(time.Hour / time.Second))},
	}
	switch kind {
	case Expired:
		form.Set("expired", "true")
	case WrongAudience:
		form.Set("aud", aud+"-not-this-service")
	case OtherTenant:
		form.Set("tid", OtherTenantID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(p.URL, "/")+"/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("idp mint: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	hc := p.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("idp mint: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("idp mint: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("idp mint: status %d", resp.StatusCode)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &tr); err != nil || tr.AccessToken == "" {
		return "", errors.New("idp mint: want a JSON body with access_token")
	}
	if kind == OtherTenant && payloadTID(tr.AccessToken) != OtherTenantID {
		return "", fmt.Errorf("idp mint: the token has no tid %q: the identity provider does not mint tenants: %w", OtherTenantID, ErrCannotMint)
	}
	return tr.AccessToken, nil
}

// payloadTID reads the `tid` claim of a compact JWS's payload, unverified ("" when it has none
// or is not one): enough to tell whether an IdP minted the tenant it was asked for.
func payloadTID(token string) string {
	var c struct {
		TID string `json:"tid"`
	}
	_ = payloadClaims(token, &c)
	return c.TID
}

// payloadExp reads the `exp` claim of a compact JWS's payload, unverified (false when it has
// none or is not one).
func payloadExp(token string) (time.Time, bool) {
	var c struct {
		Exp *json.Number `json:"exp"`
	}
	if payloadClaims(token, &c) != nil || c.Exp == nil {
		return time.Time{}, false
	}
	f, err := c.Exp.Float64()
	if err != nil || f < 0 || f > 1<<40 {
		return time.Time{}, false
	}
	return time.Unix(int64(f), 0), true
}

// payloadClaims decodes the payload of a compact JWS (header.payload.signature) into claims,
// unverified: the suite reads its own tokens' claims, it does not trust them.
func payloadClaims(token string, claims any) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errors.New("not a compact JWS")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return err
	}
	return json.Unmarshal(b, claims)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
