package auth

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	dev := map[string]string{
		EnvJWKSURL:  DevJWKSURL,
		EnvIssuer:   DevIssuer,
		EnvAudience: DevAudience,
	}
	with := func(kv ...string) func(string) string {
		m := map[string]string{}
		for k, v := range dev {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	t.Run("defaults", func(t *testing.T) {
		cfg, err := configFrom(with(EnvRequiredScope, "  das  extra "))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.JWKSURL != DevJWKSURL || cfg.Issuer != DevIssuer || cfg.Audience != "das" || cfg.RequiredScope != "das extra" ||
			!slices.Equal(cfg.Algorithms, []string{"RS256", "ES256"}) || cfg.Leeway != 30*time.Second {
			t.Fatalf("cfg = %+v", cfg)
		}
	})
	t.Run("algs and leeway", func(t *testing.T) {
		cfg, err := configFrom(with(EnvAlgorithms, " ES256 , PS256", EnvLeeway, "5"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cfg.Algorithms, []string{"ES256", "PS256"}) || cfg.Leeway != 5*time.Second {
			t.Fatalf("cfg = %+v", cfg)
		}
	})
	t.Run("zero leeway means none", func(t *testing.T) {
		cfg, err := configFrom(with(EnvLeeway, "0"))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.withDefaults().Leeway; got != 0 {
			t.Fatalf("effective leeway = %s, want 0", got)
		}
	})
	for _, tt := range []struct {
		name string
		env  func(string) string
		want []string
	}{
		{"nothing set", func(string) string { return "" }, []string{"DAS_JWKS_URL is required", "DAS_ISSUER is required", "DAS_AUDIENCE is required"}},
		{"relative JWKS URL", with(EnvJWKSURL, "/jwks.json"), []string{`DAS_JWKS_URL="/jwks.json": want an absolute http(s) URL`}},
		{"HS256", with(EnvAlgorithms, "RS256,HS256"), []string{`"HS256" is not allowed`}},
		{"none", with(EnvAlgorithms, "none"), []string{`"none" is not allowed`}},
		{"leeway not a number", with(EnvLeeway, "30s"), []string{`DAS_JWT_LEEWAY_S="30s": want whole seconds`}},
		{"leeway negative", with(EnvLeeway, "-1"), []string{`DAS_JWT_LEEWAY_S="-1"`}},
		{"leeway huge", with(EnvLeeway, "3600"), []string{`DAS_JWT_LEEWAY_S="3600"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := configFrom(tt.env)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestConfigFromEnvReadsEnvironment(t *testing.T) {
	t.Setenv(EnvJWKSURL, "https://login.example/keys")
	t.Setenv(EnvIssuer, "https://login.example/")
	t.Setenv(EnvAudience, "api://das")
	t.Setenv(EnvRequiredScope, "")
	t.Setenv(EnvAlgorithms, "")
	t.Setenv(EnvLeeway, "")
	cfg, err := ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.JWKSURL != "https://login.example/keys" || cfg.Issuer != "https://login.example/" || cfg.Audience != "api://das" || cfg.RequiredScope != "" {
		t.Fatalf("cfg = %+v", cfg)
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	_, err := New(t.Context(), Config{JWKSURL: DevJWKSURL, Issuer: DevIssuer, Audience: "das", Algorithms: []string{"HS256"}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "HS256") {
		t.Fatalf("New with HS256 allowed: %v", err)
	}
}
