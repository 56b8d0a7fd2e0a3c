package auth

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/internal/egress"
	"github.com/das-ask/ask/internal/redact"
)

// Options are a Validator's collaborators; zero values mean defaults.
type Options struct {
	// Logger receives JWKS fetch failures and rejections (never a token); nil discards.
	Logger *slog.Logger
	// HTTPClient fetches the JWKS; nil means http.DefaultTransport's settings, except that a
	// plain-http JWKS is never fetched through the environment's proxy and a response header
	// is bounded (egress.Guarded).
	// Either way each fetch is bounded by its own timeout, and each response body to 1 MiB.
	HTTPClient *http.Client
}

// Validator checks bearers against one Config. It is safe for concurrent use and implements
// ask.Authenticator.
type Validator struct {
	cfg    Config
	log    *slog.Logger
	keys   keyfunc.Keyfunc
	store  *readyStore
	parser *jwt.Parser
	scopes []string
}

var _ ask.Authenticator = (*Validator)(nil)

// ErrInvalidConfig is what New's error matches (errors.Is) when cfg itself is invalid: a
// setting to correct, which no retry of the start would get past.
var ErrInvalidConfig = errors.New("auth: invalid config")

// New returns a Validator for cfg. It tries to fetch the JWKS once (for at most a few seconds)
// but succeeds even if the JWKS is unreachable: keys are fetched later, in the background (from
// 1 s to every 30 s apart until a fetch succeeds, then every 5 min) and whenever a token names
// an unknown `kid`, and until a fetch succeeds every token is rejected
// with a description saying so (see Ready). The background refresh stops when ctx is done.
// New fails only when cfg is invalid.
func New(ctx context.Context, cfg Config, opts Options) (*Validator, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	cfg = cfg.withDefaults()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Transport: egress.Guarded()}
	}
	keys, store, err := newKeySet(ctx, cfg.JWKSURL, client, log)
	if err != nil {
		return nil, fmt.Errorf("auth: JWKS %s: %w", redact.URL(cfg.JWKSURL), err)
	}
	if !store.ready.Load() {
		log.LogAttrs(ctx, slog.LevelWarn, "auth: starting without signing keys; will fetch the JWKS on demand", slog.String("jwks_url", redact.URL(cfg.JWKSURL)))
	}
	return &Validator{
		cfg:   cfg,
		log:   log,
		keys:  keys,
		store: store,
		parser: jwt.NewParser(
			jwt.WithValidMethods(cfg.Algorithms),
			jwt.WithIssuer(cfg.Issuer),
			jwt.WithAudience(cfg.Audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(cfg.Leeway),
		),
		scopes: strings.Fields(cfg.RequiredScope),
	}, nil
}

// Issuer returns the `iss` v accepts: the authorization server whose tokens it takes, which a
// protected resource names in its metadata (RFC 9728 authorization_servers).
func (v *Validator) Issuer() string { return v.cfg.Issuer }

// RequiredScopes returns the scopes a token must grant (Config.RequiredScope), nil for none.
func (v *Validator) RequiredScopes() []string { return slices.Clone(v.scopes) }

// Ready reports whether a JWKS fetch has succeeded since New, i.e. whether tokens can be
// validated at all. Use it for readiness probes.
func (v *Validator) Ready() bool { return v.store.ready.Load() }

// Authenticate validates rawToken and returns the identity it names. Every error is an *Error
// (errors.As); its Code is CodeInvalidToken or CodeInsufficientScope. A token naming a `kid`
// we do not hold makes it refetch the JWKS first when a refetch is allowed (a burst of five,
// then one every 10 s); when none is, it is refused at once, never held waiting for one.
func (v *Validator) Authenticate(ctx context.Context, rawToken string) (ask.Identity, error) {
	id, e := v.authenticate(ctx, rawToken)
	if e != nil {
		v.log.LogAttrs(ctx, slog.LevelDebug, "auth: bearer rejected",
			slog.String("code", e.Code), slog.String("reason", e.Description))
		return ask.Identity{}, e
	}
	return id, nil
}

func (v *Validator) authenticate(ctx context.Context, rawToken string) (ask.Identity, *Error) {
	if rawToken == "" {
		return ask.Identity{}, invalidToken("no token", nil)
	}
	var c claims
	_, err := v.parser.ParseWithClaims(rawToken, &c, v.keyfunc(ctx))
	if err != nil {
		return ask.Identity{}, v.classify(err, &c)
	}
	if c.OID == "" {
		return ask.Identity{}, invalidToken("token has no oid claim", nil)
	}
	// An empty tid is refused, not taken for a token without a tenant: that would make
	// {"oid":"alice","tid":""} the same identity as {"oid":"alice"}, the tenant an issuer
	// meant to name (by mistake, empty) merged with none (claims.tenant).
	if c.tidGiven && c.TID == "" {
		return ask.Identity{}, invalidToken("token has an empty tid claim", nil)
	}
	granted := c.scopes()
	for _, s := range v.scopes {
		if !contains(granted, s) {
			return ask.Identity{}, &Error{Code: CodeInsufficientScope, Description: "token does not grant scope " + s}
		}
	}
	return ask.Identity{OID: c.OID, Tenant: c.tenant(), Scopes: granted, Token: rawToken, Expires: c.ExpiresAt.Time}, nil
}

// keyfunc refuses a `crit` header parameter (golang-jwt ignores it): RFC 7515 §4.1.11 says a
// recipient that does not understand a listed extension must reject the JWS, and we understand
// none, nor may `crit` be empty. It is checked first so that such a token never spends a JWKS
// refetch on an unknown kid. keyfunc insists on a `kid`: without one, the key could only be
// guessed by trying every key, and a rotation could not be told from a forgery. An RSA key
// shorter than minRSABits is refused whatever the JWKS says: neither jwkset nor golang-jwt
// checks the size, and Go itself refuses only keys under 1024 bits, so a 1024-bit key an IdP
// still published (or was misconfigured to publish) validated tokens.
func (v *Validator) keyfunc(ctx context.Context) jwt.Keyfunc {
	kf := v.keys.KeyfuncCtx(ctx)
	return func(t *jwt.Token) (any, error) {
		if _, ok := t.Header["crit"]; ok {
			return nil, errCrit
		}
		if kid, ok := t.Header["kid"].(string); !ok || kid == "" {
			return nil, errNoKID
		}
		key, err := kf(t)
		if err != nil {
			return nil, err
		}
		if k, ok := key.(*rsa.PublicKey); ok && k.N.BitLen() < minRSABits {
			return nil, errWeakKey
		}
		return key, nil
	}
}

// minRSABits is the smallest RSA modulus accepted (NIST SP 800-131A: 2048 bits since 2014;
// RFC 7518 §3.3 requires it of RS256 too).
const minRSABits = 2048

var (
	errNoKID   = errors.New("token header has no kid")
	errCrit    = errors.New("token header has a crit parameter")
	errWeakKey = errors.New("signing key is an RSA key shorter than 2048 bits")
)

// classify maps a jwt/jwkset error to a fixed, caller-safe description. c is what the parser
// decoded before it failed (claims validation runs last, so c is complete when that fails).
func (v *Validator) classify(err error, c *claims) *Error {
	var notNumber *notNumberError
	var outOfRange *outOfRangeError
	switch {
	case errors.Is(err, errCrit):
		return invalidToken("token header has a crit parameter: no critical extension is understood", err)
	case errors.Is(err, errNoKID):
		return invalidToken("token header has no kid", err)
	case errors.Is(err, errNotForVerifying):
		return invalidToken("signing key is not published for verifying signatures", err)
	case errors.Is(err, errWeakKey):
		return invalidToken("signing key is too short: RSA keys need at least 2048 bits", err)
	case errors.Is(err, jwkset.ErrKeyNotFound) && !v.Ready():
		return invalidToken("no signing keys are known yet: the issuer's JWKS could not be fetched",
			fmt.Errorf("%w: %w", ErrKeysNotLoaded, err))
	case errors.Is(err, jwkset.ErrKeyNotFound):
		return invalidToken("signing key is unknown", err)
	case errors.As(err, &notNumber):
		return invalidToken("token "+notNumber.claim+" claim is not a number", err)
	case errors.As(err, &outOfRange):
		return invalidToken("token "+outOfRange.claim+" claim is out of range", err)
	case errors.Is(err, jwt.ErrTokenMalformed):
		return invalidToken("token is malformed", err)
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return invalidToken("token cannot be verified", err)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		if strings.Contains(err.Error(), "signing method") {
			return invalidToken("signing algorithm is not allowed", err)
		}
		return invalidToken("signature is invalid", err)
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		// golang-jwt returns this one error for a missing exp, aud or iss alike and names the
		// claim only in its message text, so the decoded claims say which one it was.
		if name := c.missingRequired(); name != "" {
			return invalidToken("token has no "+name+" claim", err)
		}
		return invalidToken("token lacks a required claim", err)
	case errors.Is(err, jwt.ErrTokenExpired):
		return invalidToken("token is expired", err)
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return invalidToken("token is not valid yet", err)
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return invalidToken("token is issued in the future", err)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return invalidToken("issuer is not accepted", err)
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return invalidToken("audience is not accepted", err)
	default:
		return invalidToken("token is invalid", err)
	}
}
