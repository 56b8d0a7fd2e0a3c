package auth

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/das-ask/ask/internal/httpurl"
	"github.com/das-ask/ask/internal/redact"
)

// The environment variables of Config (package config reads them). The ask service and every
// source read the same set, because they defend the same resource; errors name them.
const (
	EnvJWKSURL       = "DAS_JWKS_URL"
	EnvIssuer        = "DAS_ISSUER"
	EnvAudience      = "DAS_AUDIENCE"
	EnvRequiredScope = "DAS_REQUIRED_SCOPE"
	EnvAlgorithms    = "DAS_JWT_ALGS"
	EnvLeeway        = "DAS_JWT_LEEWAY_S"
)

// Defaults applied by New when a setting is empty.
const (
	DefaultAlgorithms = "RS256,ES256"
	DefaultLeeway     = 30 * time.Second
)

// Dev stack values (see DevConfig).
const (
	DevIssuer   = "http://127.0.0.1:8090"
	DevJWKSURL  = DevIssuer + "/.well-known/jwks.json"
	DevAudience = "das"
	DevScope    = "das"
)

// maxLeeway bounds DAS_JWT_LEEWAY_S: more than this is a misconfiguration, not clock skew.
const maxLeeway = 10 * time.Minute

// asymmetricAlgs are the only algorithms a Config may allow. HMAC and `none` are never
// accepted: a JWKS publishes public keys, and accepting HS* would let anyone holding the public
// key forge tokens (the classic algorithm-confusion attack).
var asymmetricAlgs = []string{
	"RS256", "RS384", "RS512",
	"PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512",
	"EdDSA",
}

// Config is what a bearer is validated against.
type Config struct {
	// JWKSURL is where the tenant's signing keys are published (http or https).
	JWKSURL string
	// Issuer is the exact `iss` accepted; it becomes ask.Identity.Tenant (with the token's `tid`
	// claim, when it has one).
	Issuer string
	// Audience must be one of the token's `aud` values.
	Audience string
	// RequiredScope lists, space-separated, the scopes a token must grant; empty requires none.
	RequiredScope string
	// Algorithms is the `alg` allow-list; empty means RS256 and ES256.
	Algorithms []string
	// Leeway is the clock skew tolerated on exp, nbf and iat; zero means DefaultLeeway. Use a
	// negative value for none.
	Leeway time.Duration
}

// DevConfig returns the settings of the development stack: the dev identity provider on
// 127.0.0.1:8090 (package demo/idp), audience and scope `das`. Never use it outside development.
func DevConfig() Config {
	return Config{
		JWKSURL:       DevJWKSURL,
		Issuer:        DevIssuer,
		Audience:      DevAudience,
		RequiredScope: DevScope,
		Algorithms:    strings.Split(DefaultAlgorithms, ","),
		Leeway:        DefaultLeeway,
	}
}

// validate reports every problem with cfg at once, naming the environment variable of each.
func (cfg Config) validate() error {
	var errs []error
	if cfg.JWKSURL == "" {
		errs = append(errs, fmt.Errorf("%s is required: the URL of the issuer's JWKS (dev: %s)", EnvJWKSURL, DevJWKSURL))
	} else if _, err := httpurl.Parse(cfg.JWKSURL); err != nil {
		errs = append(errs, fmt.Errorf("%s=%q: want an absolute http(s) URL", EnvJWKSURL, redact.URL(cfg.JWKSURL)))
	}
	if cfg.Issuer == "" {
		errs = append(errs, fmt.Errorf("%s is required: the exact `iss` to accept (dev: %s)", EnvIssuer, DevIssuer))
	}
	if cfg.Audience == "" {
		errs = append(errs, fmt.Errorf("%s is required: the `aud` to accept (dev: %s)", EnvAudience, DevAudience))
	}
	for _, a := range cfg.Algorithms {
		if !slices.Contains(asymmetricAlgs, a) {
			errs = append(errs, fmt.Errorf("%s: %q is not allowed; want a comma-separated subset of %s", EnvAlgorithms, a, strings.Join(asymmetricAlgs, ",")))
		}
	}
	if cfg.Leeway > maxLeeway {
		errs = append(errs, fmt.Errorf("%s: leeway %s exceeds %s", EnvLeeway, cfg.Leeway, maxLeeway))
	}
	return errors.Join(errs...)
}

// withDefaults fills empty settings.
func (cfg Config) withDefaults() Config {
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = strings.Split(DefaultAlgorithms, ",")
	}
	switch {
	case cfg.Leeway == 0:
		cfg.Leeway = DefaultLeeway
	case cfg.Leeway < 0:
		cfg.Leeway = 0
	}
	return cfg
}
