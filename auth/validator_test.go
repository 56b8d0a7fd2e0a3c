package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/idp/idptest"
)

func newValidator(t *testing.T, s *idptest.Server) *auth.Validator {
	t.Helper()
	v, err := auth.New(t.Context(), s.Config(), auth.Options{})
	if err != nil {
		t.Fatalf("auth.New: %v", err)
	}
	return v
}

func mint(t *testing.T, s *idptest.Server, c idp.Claims) string {
	t.Helper()
	tok, err := s.Mint(c)
	if err != nil {
		t.Fatalf("Mint: %v", err)
	}
	return tok
}

// rsaPublicKey fetches the IdP's published RSA key, as an attacker would.
func rsaPublicKey(t *testing.T, s *idptest.Server) *rsa.PublicKey {
	t.Helper()
	resp, err := http.Get(s.JWKSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	set, err := (func() (jwkset.Storage, error) {
		var m jwkset.JWKSMarshal
		if err := jsonUnmarshal(b, &m); err != nil {
			return nil, err
		}
		return m.ToStorage()
	})()
	if err != nil {
		t.Fatal(err)
	}
	jwk, err := set.KeyRead(t.Context(), s.KeyID(idp.RS256))
	if err != nil {
		t.Fatal(err)
	}
	pub, ok := jwk.Key().(*rsa.PublicKey)
	if !ok {
		t.Fatalf("RSA key is %T", jwk.Key())
	}
	return pub
}

func TestValidatorTable(t *testing.T) {
	s := idptest.Start(t)
	v := newValidator(t, s)
	pub := rsaPublicKey(t, s)
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})

	valid := idp.Claims{OID: "alice"}
	with := func(f func(*idp.Claims)) idp.Claims { c := valid; f(&c); return c }
	tests := []struct {
		name     string
		token    func(t *testing.T) string
		wantCode string // "" = accepted
		wantDesc string
		wantOID  string
	}{
		{name: "valid RS256", token: func(t *testing.T) string { return mint(t, s, valid) }, wantOID: "alice"},
		{name: "valid ES256", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Alg = idp.ES256; c.OID = "bob" }))
		}, wantOID: "bob"},
		{name: "scp array instead of scope", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"scope": nil, "scp": []string{"other", "das"}} }))
		}, wantOID: "alice"},
		{name: "alg none", token: func(t *testing.T) string {
			tok := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{
				"iss": s.Issuer(), "aud": "das", "scope": "das", "oid": "alice", "exp": time.Now().Add(time.Hour).Unix(),
			})
			tok.Header["kid"] = s.KeyID(idp.RS256)
			str, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
			if err != nil {
				t.Fatal(err)
			}
			return str
		}, wantCode: auth.CodeInvalidToken, wantDesc: "signing algorithm is not allowed"},
		{name: "HS256 signed with the RSA public key", token: func(t *testing.T) string {
			tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
				"iss": s.Issuer(), "aud": "das", "scope": "das", "oid": "alice", "exp": time.Now().Add(time.Hour).Unix(),
			})
			tok.Header["kid"] = s.KeyID(idp.RS256)
			str, err := tok.SignedString(pubPEM)
			if err != nil {
				t.Fatal(err)
			}
			return str
		}, wantCode: auth.CodeInvalidToken, wantDesc: "signing algorithm is not allowed"},
		{name: "forged: unpublished key with a known kid", token: func(t *testing.T) string {
			tok, err := s.Forge(valid)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}, wantCode: auth.CodeInvalidToken, wantDesc: "signature is invalid"},
		{name: "forged ES256", token: func(t *testing.T) string {
			tok, err := s.Forge(with(func(c *idp.Claims) { c.Alg = idp.ES256 }))
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}, wantCode: auth.CodeInvalidToken, wantDesc: "signature is invalid"},
		{name: "expired", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Expired = true }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token is expired"},
		{name: "no exp", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"exp": nil} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token has no exp claim"},
		// golang-jwt reports a required aud or iss that is absent with the same error as a
		// missing exp: the description must name the claim that is actually missing.
		{name: "no aud", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"aud": nil} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token has no aud claim"},
		{name: "empty aud list", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"aud": []string{}} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token has no aud claim"},
		{name: "aud an empty string", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"aud": ""} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token has no aud claim"},
		{name: "no iss", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"iss": nil} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token has no iss claim"},
		{name: "no exp, aud or iss", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"exp": nil, "aud": nil, "iss": nil} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token has no exp claim"},
		{name: "no aud, and expired", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Expired = true; c.Extra = map[string]any{"aud": nil} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token has no aud claim"},
		// RFC 7519 §2: a NumericDate is a JSON number. golang-jwt decodes one through
		// json.Number, which also takes a string holding a number.
		{name: "exp a string", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"exp": unixString(time.Hour)} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token exp claim is not a number"},
		{name: "nbf a string", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"nbf": unixString(-time.Minute)} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token nbf claim is not a number"},
		{name: "iat a string", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"iat": unixString(-time.Minute)} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token iat claim is not a number"},
		{name: "exp a string that is no number", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"exp": "tomorrow"} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token exp claim is not a number"},
		{name: "exp a boolean", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"exp": true} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token exp claim is not a number"},
		{name: "exp with a fraction", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"exp": float64(time.Now().Add(time.Hour).Unix()) + 0.5} }))
		}, wantOID: "alice"},
		// golang-jwt turns a date beyond the int64 range into the most negative int64: an nbf or
		// iat so far ahead was read as long past, and the token accepted.
		{name: "nbf beyond the int64 range", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"nbf": 1e19} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token nbf claim is out of range"},
		{name: "iat beyond the int64 range", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"iat": 1e300} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token iat claim is out of range"},
		{name: "nbf after year 9999", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"nbf": 253402300800} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token nbf claim is out of range"},
		{name: "exp beyond the float range", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"exp": json.RawMessage("1e400")} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token exp claim is out of range"},
		{name: "exp in year 9999", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"exp": 253402300799} }))
		}, wantOID: "alice"},
		// RFC 7519 §4: claim names are case-sensitive; encoding/json matches them in any case.
		{name: "OID instead of oid", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.OID = ""; c.Extra = map[string]any{"OID": "mallory"} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token has no oid claim"},
		{name: "AUD instead of aud", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"aud": nil, "AUD": "das"} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token has no aud claim"},
		{name: "Exp instead of exp", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"exp": nil, "Exp": time.Now().Add(time.Hour).Unix()} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token has no exp claim"},
		{name: "scope with a long s (folds to scope)", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"scope": nil, "\u017fcope": "das"} }))
		}, wantCode: auth.CodeInsufficientScope, wantDesc: "token does not grant scope das"},
		{name: "OID beside oid names nobody else", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"OID": "mallory", "Oid": "mallory", "TID": "other"} }))
		}, wantOID: "alice"},
		// An empty tid is a tenant named by mistake, not no tenant: taken as none, it made
		// {"oid":"alice","tid":""} the identity of tenant-less alice.
		{name: "tid empty", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"tid": ""} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token has an empty tid claim"},
		{name: "tid null is no tid", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"tid": json.RawMessage("null")} }))
		}, wantOID: "alice"},
		{name: "nbf in the future", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.NotBefore = time.Now().Add(10 * time.Minute) }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token is not valid yet"},
		{name: "nbf within leeway", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.NotBefore = time.Now().Add(10 * time.Second) }))
		}, wantOID: "alice"},
		{name: "iat within leeway", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"iat": time.Now().Add(10 * time.Second).Unix()} }))
		}, wantOID: "alice"},
		{name: "iat in the future", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"iat": time.Now().Add(time.Hour).Unix()} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token is issued in the future"},
		{name: "ES256 token naming the RS256 kid", token: func(t *testing.T) string {
			key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
				"iss": s.Issuer(), "aud": "das", "scope": "das", "oid": "alice", "exp": time.Now().Add(time.Hour).Unix(),
			})
			tok.Header["kid"] = s.KeyID(idp.RS256)
			str, err := tok.SignedString(key)
			if err != nil {
				t.Fatal(err)
			}
			return str
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token cannot be verified"},
		{name: "no kid", token: func(t *testing.T) string {
			tok := mint(t, s, valid)
			// Re-sign is impossible without the key; drop kid from a forged-but-well-formed header instead.
			parts := strings.Split(tok, ".")
			parts[0] = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`))
			return strings.Join(parts, ".")
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token header has no kid"},
		{name: "audience list containing das", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"aud": []string{"other", "das"}} }))
		}, wantOID: "alice"},
		{name: "wrong issuer", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Issuer = "http://evil.example" }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "issuer is not accepted"},
		{name: "wrong audience", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Audience = "other" }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "audience is not accepted"},
		{name: "missing scope", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"scope": nil} }))
		}, wantCode: auth.CodeInsufficientScope, wantDesc: "token does not grant scope das"},
		{name: "insufficient scope", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Scope = "read other" }))
		}, wantCode: auth.CodeInsufficientScope, wantDesc: "token does not grant scope das"},
		{name: "missing oid", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.OID = "" }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token has no oid claim"},
		{name: "empty oid", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"oid": ""} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token has no oid claim"},
		{name: "oid not a string", token: func(t *testing.T) string {
			return mint(t, s, with(func(c *idp.Claims) { c.Extra = map[string]any{"oid": 42} }))
		}, wantCode: auth.CodeInvalidToken, wantDesc: "token is malformed"},
		{name: "malformed", token: func(*testing.T) string { return "not.a.jwt" },
			wantCode: auth.CodeInvalidToken, wantDesc: "token is malformed"},
		{name: "empty", token: func(*testing.T) string { return "" },
			wantCode: auth.CodeInvalidToken, wantDesc: "no token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := tt.token(t)
			id, err := v.Authenticate(t.Context(), tok)
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("Authenticate: %v", err)
				}
				if id.OID != tt.wantOID || id.Tenant != s.Issuer() || id.Token != tok || !slices.Contains(id.Scopes, "das") {
					t.Fatalf("identity = %+v (scopes %v), want oid %q tenant %q, the raw token and scope das", id, id.Scopes, tt.wantOID, s.Issuer())
				}
				return
			}
			var e *auth.Error
			if !errors.As(err, &e) {
				t.Fatalf("Authenticate error = %v, want *auth.Error", err)
			}
			if e.Code != tt.wantCode || e.Description != tt.wantDesc {
				t.Fatalf("error = %q/%q, want %q/%q", e.Code, e.Description, tt.wantCode, tt.wantDesc)
			}
			if tok != "" && (containsStr(err.Error(), tok) || containsStr(e.Description, tok)) {
				t.Fatalf("error text contains the token")
			}
			if id.OID != "" || id.Token != "" {
				t.Fatalf("identity on error = %+v, want zero", id)
			}
		})
	}
}

// unixString is now+d as a NumericDate sent as a JSON string, as some issuers get wrong.
func unixString(d time.Duration) string { return strconv.FormatInt(time.Now().Add(d).Unix(), 10) }

// A Validator is used by every request at once.
func TestValidatorConcurrent(t *testing.T) {
	s := idptest.Start(t)
	v := newValidator(t, s)
	good := s.Token(t, "alice")
	bad := mint(t, s, idp.Claims{OID: "alice", Expired: true})
	var wg sync.WaitGroup
	var failures atomic.Int64
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if _, err := v.Authenticate(t.Context(), good); err != nil {
					failures.Add(1)
				}
				if _, err := v.Authenticate(t.Context(), bad); err == nil {
					failures.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Fatalf("%d wrong verdicts under concurrency", n)
	}
}

// The identity says when its token expires (its exp), so that whoever forwards the token (the
// agent, to every source) can tell a refusal after that moment from any other.
func TestIdentityCarriesTheTokensExpiry(t *testing.T) {
	s := idptest.Start(t)
	v := newValidator(t, s)
	exp := time.Now().Add(2 * time.Minute).Truncate(time.Second)
	tok := mint(t, s, idp.Claims{OID: "alice", Extra: map[string]any{"exp": exp.Unix()}})
	id, err := v.Authenticate(t.Context(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if !id.Expires.Equal(exp) {
		t.Errorf("Expires = %v, want the token's exp %v", id.Expires, exp)
	}
}
