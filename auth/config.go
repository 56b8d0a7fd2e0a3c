package auth

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Environment variables read by ConfigFromEnv. The ask service and every source read the same
// set, because they defend the same resource.
const (
	EnvJWKSURL       = "DAS_JWKS_URL"
	EnvIssuer        = "DAS_ISSUER"
	EnvAudience      = "DAS_AUDIENCE"
	EnvRequiredScope = "DAS_REQUIRED_SCOPE"
	EnvAlgorithms    = "DAS_JWT_ALGS"
	EnvLeeway        = "DAS_JWT_LEEWAY_S"
)

// Defaults applied by ConfigFromEnv and New when a setting is empty.
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
	// Issuer is the exact `iss` accepted; it becomes ask.Identity.Tenant.
	Issuer string
	// Audience must be one of the token's `aud` values.
	Audience string
	// RequiredScope lists, space-separated, the scopes a token must grant; empty requires none.
	RequiredScope string
	// Algorithms is the `alg` allow-list; empty means RS256 and ES256.
	Algorithms []string
	// Leeway is the clock skew tolerated on exp and nbf; zero means DefaultLeeway. Use a
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

// ConfigFromEnv reads the DAS_* variables. DAS_JWKS_URL, DAS_ISSUER and DAS_AUDIENCE are
// required (there is no safe default for whom to trust); DAS_REQUIRED_SCOPE may be empty;
// DAS_JWT_ALGS defaults to RS256,ES256 and DAS_JWT_LEEWAY_S to 30. A missing or invalid value
// is an error naming the variable and what is expected.
func ConfigFromEnv() (Config, error) {
	return configFrom(os.Getenv)
}

func configFrom(getenv func(string) string) (Config, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	cfg := Config{
		JWKSURL:       get(EnvJWKSURL),
		Issuer:        get(EnvIssuer),
		Audience:      get(EnvAudience),
		RequiredScope: strings.Join(strings.Fields(getenv(EnvRequiredScope)), " "),
		Leeway:        DefaultLeeway,
	}
	var errs []error
	algs := get(EnvAlgorithms)
	if algs == "" {
		algs = DefaultAlgorithms
	}
	for a := range strings.SplitSeq(algs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			cfg.Algorithms = append(cfg.Algorithms, a)
		}
	}
	if s := get(EnvLeeway); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || time.Duration(n)*time.Second > maxLeeway {
			errs = append(errs, fmt.Errorf("%s=%q: want whole seconds between 0 and %d", EnvLeeway, s, int(maxLeeway/time.Second)))
		} else {
			cfg.Leeway = time.Duration(n) * time.Second
			if n == 0 {
				cfg.Leeway = -1 // explicit zero: no leeway
			}
		}
	}
	if err := cfg.validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return cfg, nil
}

// validate reports every problem with cfg at once, naming the environment variable of each.
func (cfg Config) validate() error {
	var errs []error
	if cfg.JWKSURL == "" {
		errs = append(errs, fmt.Errorf("%s is required: the URL of the issuer's JWKS (dev: %s)", EnvJWKSURL, DevJWKSURL))
	} else if u, err := url.Parse(cfg.JWKSURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("%s=%q: want an absolute http(s) URL", EnvJWKSURL, cfg.JWKSURL))
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
