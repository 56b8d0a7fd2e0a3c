package auth_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/idp/idptest"
	"github.com/das-ask/ask/internal/logtest"
)

// No log line carries a token, whether it is accepted, rejected for any reason, or arrives
// while the JWKS cannot be fetched.
func TestTokensNeverLogged(t *testing.T) {
	var buf logtest.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := idptest.StartWith(t, idp.Options{Logger: log})
	v, err := auth.New(t.Context(), s.Config(), auth.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	down, err := auth.New(t.Context(), auth.Config{JWKSURL: "http://127.0.0.1:1/jwks.json", Issuer: s.Issuer(), Audience: "das"}, auth.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for _, c := range []idp.Claims{
		{OID: "alice"}, {OID: "bob", Alg: idp.ES256}, {OID: "alice", Expired: true},
		{OID: "alice", Audience: "x"}, {OID: "alice", Scope: "x"}, {},
	} {
		tok, err := s.Mint(c)
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, tok)
	}
	forged, err := s.Forge(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, forged)
	// The down validator sees two tokens only: more would wait for unknown-kid refetch slots.
	for val, toks := range map[*auth.Validator][]string{v: tokens, down: tokens[:2]} {
		h := auth.Middleware(val, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		for _, tok := range toks {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("Authorization", "Bearer "+tok)
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
	}
	out := buf.String()
	for _, want := range []string{"idp: token minted", "auth: bearer rejected", "auth: JWKS fetch failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	for _, tok := range tokens {
		// A token's signature alone is as secret as the token.
		buf.AssertAbsent(t, tok, tok[strings.LastIndexByte(tok, '.')+1:])
	}
}

// TestJWKSURLLoggedWithoutItsPassword: the warnings of a JWKS that cannot be fetched name its
// URL without the password of its userinfo (the HTTP error beside it already hides it). Found
// by an operator's audit: askd with DAS_JWKS_URL=http://u:S3CRETPW@… logged the password in
// jwks_url at start and on every refetch.
func TestJWKSURLLoggedWithoutItsPassword(t *testing.T) {
	var buf logtest.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	if _, err := auth.New(t.Context(), auth.Config{JWKSURL: "http://u:hunter2@127.0.0.1:1/jwks.json", Issuer: "http://127.0.0.1:1", Audience: "das"}, auth.Options{Logger: log}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"auth: JWKS fetch failed", "auth: starting without signing keys", `"jwks_url":"http://u:xxxxx@127.0.0.1:1/jwks.json"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	buf.AssertAbsent(t, "hunter2")
}
