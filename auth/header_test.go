package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/das-ask/ask/auth"
)

// localIssuer is an issuer whose one ES256 key the test holds, its JWKS served in memory: a
// test can sign a token with any protected header it likes and still have it verify, which
// the dev IdP (it sets only alg, typ and kid) cannot do.
type localIssuer struct {
	key *ecdsa.PrivateKey
	kid string
	tr  *handlerTransport
	v   *auth.Validator
}

const localIssuerURL = "http://issuer.local"

func newLocalIssuer(t *testing.T) *localIssuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	const kid = "local-es256"
	jwk, err := jwkset.NewJWKFromKey(key.Public(), jwkset.JWKOptions{
		Metadata: jwkset.JWKMetadataOptions{ALG: jwkset.AlgES256, KID: kid, USE: jwkset.UseSig},
	})
	if err != nil {
		t.Fatal(err)
	}
	set := jwkset.NewMemoryStorage()
	if err := set.KeyWrite(t.Context(), jwk); err != nil {
		t.Fatal(err)
	}
	raw, err := set.JSONPublic(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tr := &handlerTransport{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/jwks.json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(raw)
	})}
	v, err := auth.New(t.Context(), auth.Config{
		JWKSURL: localIssuerURL + "/.well-known/jwks.json", Issuer: localIssuerURL,
		Audience: "das", RequiredScope: "das", Algorithms: []string{"ES256"},
	}, auth.Options{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Ready() {
		t.Fatal("validator has not fetched the local JWKS")
	}
	return &localIssuer{key: key, kid: kid, tr: tr, v: v}
}

// sign returns a token with the claims the validator accepts, signed by the published key, its
// header carrying alg, typ, the published kid and then header (which may override them).
func (li *localIssuer) sign(t *testing.T, header map[string]any) string {
	t.Helper()
	now := time.Now()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"iss": localIssuerURL, "aud": "das", "scope": "das", "oid": "alice",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	})
	tok.Header["kid"] = li.kid
	for k, v := range header {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(li.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// RFC 7515 §4.1.11: a recipient that does not understand an extension listed in `crit` must
// reject the JWS, and `crit` must not be empty when present. This validator understands no
// extension, so any `crit` at all is refused, even on a token that is otherwise valid and
// properly signed; and it is refused before the kid is looked up, so it never spends a JWKS
// refetch.
func TestCritHeaderRefused(t *testing.T) {
	li := newLocalIssuer(t)
	const wantDesc = "token header has a crit parameter: no critical extension is understood"
	tests := []struct {
		name   string
		header map[string]any
		want   string // "" = accepted
	}{
		{name: "no crit (the control)", header: nil},
		{name: "an unknown extension, present", header: map[string]any{
			"crit": []string{"urn:x:must-understand"}, "urn:x:must-understand": true}, want: wantDesc},
		{name: "an unknown extension, absent", header: map[string]any{
			"crit": []string{"urn:x:must-understand"}}, want: wantDesc},
		{name: "a registered parameter", header: map[string]any{"crit": []string{"kid"}}, want: wantDesc},
		{name: "empty", header: map[string]any{"crit": []string{}}, want: wantDesc},
		{name: "not an array", header: map[string]any{"crit": "urn:x:must-understand"}, want: wantDesc},
		{name: "null", header: map[string]any{"crit": nil}, want: wantDesc},
		{name: "with an unknown kid", header: map[string]any{
			"crit": []string{"urn:x:must-understand"}, "urn:x:must-understand": true, "kid": "unpublished"}, want: wantDesc},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := li.sign(t, tt.header)
			fetches := li.tr.fetches.Load()
			id, err := li.v.Authenticate(t.Context(), tok)
			if tt.want == "" {
				if err != nil || id.OID != "alice" {
					t.Fatalf("Authenticate = %+v, %v; want alice accepted", id, err)
				}
				return
			}
			var e *auth.Error
			if !errors.As(err, &e) {
				t.Fatalf("Authenticate error = %v, want *auth.Error", err)
			}
			if got, want := e.Code+"/"+e.Description, auth.CodeInvalidToken+"/"+tt.want; got != want {
				t.Fatalf("error = %q, want %q", got, want)
			}
			if containsStr(err.Error(), tok) {
				t.Fatalf("error text contains the token")
			}
			if got := li.tr.fetches.Load(); got != fetches {
				t.Fatalf("JWKS fetched %d times for a token with crit, want none", got-fetches)
			}
		})
	}
}
