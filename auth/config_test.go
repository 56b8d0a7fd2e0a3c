package auth

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/das-ask/ask/internal/logtest"
)

// The environment's spelling of these settings is tested in package config.

func TestZeroLeewayMeansDefaultNegativeNone(t *testing.T) {
	if got := (Config{}).withDefaults().Leeway; got != DefaultLeeway {
		t.Errorf("zero leeway = %s, want the default %s", got, DefaultLeeway)
	}
	if got := (Config{Leeway: -1}).withDefaults().Leeway; got != 0 {
		t.Errorf("negative leeway = %s, want none", got)
	}
}

func TestNewRejectsInvalidConfig(t *testing.T) {
	_, err := New(t.Context(), Config{JWKSURL: DevJWKSURL, Issuer: DevIssuer, Audience: "das", Algorithms: []string{"HS256"}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "HS256") {
		t.Fatalf("New with HS256 allowed: %v", err)
	}
}

// TestInvalidJWKSURLIsShownWithoutItsPassword: a JWKS URL that is refused is named in the error
// as written but for the password of its userinfo, as every other URL setting askd refuses.
// Found by an operator's audit: askd with DAS_JWKS_URL=ftp://u:S3CRETPW@x/ printed the password.
func TestInvalidJWKSURLIsShownWithoutItsPassword(t *testing.T) {
	for _, raw := range []string{"ftp://u:hunter2@idp/jwks.json", "http://u:hunter2@idp/%zz", "//u:hunter2@idp/jwks.json",
		// A password with a / not percent-encoded, as a base64 one may have: url.Parse refuses
		// the URL (the authority ends at the /) and the redaction took the password as a host.
		"https://u:hun/ter2@idp/jwks.json"} {
		_, err := New(t.Context(), Config{JWKSURL: raw, Issuer: DevIssuer, Audience: "das"}, Options{})
		if err == nil || !strings.Contains(err.Error(), EnvJWKSURL) || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "ter2") {
			t.Errorf("DAS_JWKS_URL=%s: error %v, want it named without its password", raw, err)
		}
	}
}

// TestJWKSURLWithoutAHostIsRefused: http://:8090/jwks.json names a port but no host; Go's dialer
// then dials the local machine, so it was accepted and the keys fetched from whatever listens
// there, rather than refused as the malformed URL it is.
func TestJWKSURLWithoutAHostIsRefused(t *testing.T) {
	for _, raw := range []string{"http://:8090/jwks.json", "https://u:hunter2@:443/jwks.json"} {
		_, err := New(t.Context(), Config{JWKSURL: raw, Issuer: DevIssuer, Audience: "das"}, Options{})
		if err == nil || !strings.Contains(err.Error(), EnvJWKSURL) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("DAS_JWKS_URL=%s: error %v, want it refused, named", raw, err)
		}
	}
}

// TestJWKSFetchFailureIsLoggedWithoutTheURLsSecrets: the warning "auth: JWKS fetch failed"
// showed the URL with its password and query values hidden (jwks_url) and then the fetch's
// error whole, which quotes the URL as the HTTP client sent it: the query's values (an IdP
// given a key that way, ?key=…) in clear, against SECURITY.md's promise for configured URLs.
func TestJWKSFetchFailureIsLoggedWithoutTheURLsSecrets(t *testing.T) {
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	down := roundTripper(func(*http.Request) (*http.Response, error) { return nil, errors.New("connection refused") })
	raw := "https://u:hunter2@idp.example/jwks.json?key=SECRETQ1&v=2"
	if _, err := New(t.Context(), Config{JWKSURL: raw, Issuer: DevIssuer, Audience: "das"},
		Options{HTTPClient: &http.Client{Transport: down}, Logger: log}); err != nil {
		t.Fatal(err)
	}
	if err := logs.WaitFor(t.Context(), "auth: JWKS fetch failed"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "key=xxxxx") {
		t.Errorf("the log does not name the URL's parameters: %s", logs)
	}
	logs.AssertAbsent(t, "SECRETQ1", "hunter2")
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
