package idp_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/idp/idptest"
)

func newIdP(t *testing.T, opts idp.Options) *idp.IdP {
	t.Helper()
	if opts.Issuer == "" {
		opts.Issuer = "http://127.0.0.1:8090"
	}
	p, err := idp.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type jwks struct {
	Keys []struct {
		KTY, KID, ALG, USE, CRV string
		D                       string `json:"d"`
		P                       string `json:"p"`
	} `json:"keys"`
}

func getJWKS(t *testing.T, h http.Handler) jwks {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/.well-known/jwks.json", nil))
	if w.Code != 200 {
		t.Fatalf("JWKS status %d", w.Code)
	}
	var set jwks
	if err := json.Unmarshal(w.Body.Bytes(), &set); err != nil {
		t.Fatal(err)
	}
	return set
}

func kids(set jwks) []string {
	var out []string
	for _, k := range set.Keys {
		out = append(out, k.KID)
	}
	slices.Sort(out)
	return out
}

func TestJWKSPublishesPublicKeysOnly(t *testing.T) {
	p := newIdP(t, idp.Options{})
	set := getJWKS(t, p.Handler())
	if len(set.Keys) != 2 {
		t.Fatalf("%d keys, want 2", len(set.Keys))
	}
	for _, k := range set.Keys {
		if k.D != "" || k.P != "" {
			t.Fatalf("JWKS publishes private material for %s", k.KID)
		}
		if k.USE != "sig" || k.KID == "" {
			t.Fatalf("key %+v: want use=sig and a kid", k)
		}
		switch k.ALG {
		case "RS256":
			if k.KTY != "RSA" || k.KID != p.KeyID(idp.RS256) {
				t.Fatalf("RS256 key %+v", k)
			}
		case "ES256":
			if k.KTY != "EC" || k.CRV != "P-256" || k.KID != p.KeyID(idp.ES256) {
				t.Fatalf("ES256 key %+v", k)
			}
		default:
			t.Fatalf("unexpected alg %q", k.ALG)
		}
	}
}

func TestDiscovery(t *testing.T) {
	p := newIdP(t, idp.Options{Issuer: "http://127.0.0.1:9999/"})
	w := httptest.NewRecorder()
	p.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/.well-known/openid-configuration", nil))
	var d map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if d["issuer"] != "http://127.0.0.1:9999" || d["jwks_uri"] != "http://127.0.0.1:9999/.well-known/jwks.json" || d["token_endpoint"] != "http://127.0.0.1:9999/token" {
		t.Fatalf("discovery = %v", d)
	}
	// Every claim POST /token can mint is listed, tid among them.
	claims, _ := d["claims_supported"].([]any)
	for _, want := range []string{"oid", "tid", "scope", "aud", "exp"} {
		if !slices.Contains(claims, any(want)) {
			t.Errorf("claims_supported %v lacks %s", claims, want)
		}
	}
}

// The issuer serves OAuth 2.0 Authorization Server Metadata (RFC 8414) as well as OIDC
// discovery: it is where the demo source's protected resource metadata (RFC 9728) sends a
// client, and MCP clients try RFC 8414's URL first. Both say only what the IdP does: a token
// endpoint with its own grant, no authorization endpoint, so no response type (until 2026-12-06
// RFC 8414's URL was a 404, and discovery claimed the implicit grant's "token" response type).
func TestAuthorizationServerMetadata(t *testing.T) {
	p := newIdP(t, idp.Options{Issuer: "http://127.0.0.1:9999"})
	for _, path := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		w := httptest.NewRecorder()
		p.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		var d map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &d); w.Code != http.StatusOK || err != nil {
			t.Fatalf("GET %s: %d %v", path, w.Code, err)
		}
		if d["issuer"] != "http://127.0.0.1:9999" || d["jwks_uri"] != "http://127.0.0.1:9999/.well-known/jwks.json" || d["token_endpoint"] != "http://127.0.0.1:9999/token" {
			t.Errorf("%s = %v", path, d)
		}
		if rt, ok := d["response_types_supported"].([]any); !ok || len(rt) != 0 {
			t.Errorf("%s: response_types_supported %v, want [] (there is no authorization endpoint)", path, d["response_types_supported"])
		}
		if _, ok := d["authorization_endpoint"]; ok {
			t.Errorf("%s names an authorization endpoint it does not serve", path)
		}
		if gt, _ := d["grant_types_supported"].([]any); !slices.Equal(gt, []any{"urn:das:dev:mint"}) {
			t.Errorf("%s: grant_types_supported %v", path, gt)
		}
	}
}

func parse(t *testing.T, tok string) (jwt.MapClaims, map[string]any) {
	t.Helper()
	c := jwt.MapClaims{}
	parsed, _, err := jwt.NewParser().ParseUnverified(tok, c)
	if err != nil {
		t.Fatal(err)
	}
	return c, parsed.Header
}

func TestMintDefaults(t *testing.T) {
	p := newIdP(t, idp.Options{})
	before := time.Now().Add(-time.Second)
	tok, err := p.Mint(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	c, h := parse(t, tok)
	exp, _ := c.GetExpirationTime()
	if c["iss"] != "http://127.0.0.1:8090" || c["aud"] != "das" || c["scope"] != "das" || c["oid"] != "alice" || c["sub"] != "alice" {
		t.Fatalf("claims = %v", c)
	}
	if d := exp.Sub(before); d < time.Hour || d > time.Hour+5*time.Second {
		t.Fatalf("exp in %s, want 1h", d)
	}
	if h["alg"] != "RS256" || h["kid"] != p.KeyID(idp.RS256) {
		t.Fatalf("header = %v", h)
	}

	tok, err = p.Mint(idp.Claims{OID: "bob", Expired: true, Alg: "ES256", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	c, h = parse(t, tok)
	exp, _ = c.GetExpirationTime()
	iat, _ := c.GetIssuedAt()
	nbf, _ := c.GetNotBefore()
	if !exp.Before(time.Now().Add(-5*time.Minute)) || !iat.Before(exp.Time) || !nbf.Before(exp.Time) {
		t.Fatalf("expired token: exp %v iat %v nbf %v", exp, iat, nbf)
	}
	if h["alg"] != "ES256" || h["kid"] != p.KeyID(idp.ES256) {
		t.Fatalf("header = %v", h)
	}
	if _, err := p.Mint(idp.Claims{OID: "x", Alg: "HS256"}); err == nil {
		t.Fatal("Mint with HS256 succeeded")
	}
	if _, err := p.Mint(idp.Claims{OID: "x", TTL: 48 * time.Hour}); err == nil {
		t.Fatal("Mint with a 48h TTL succeeded")
	}
}

func TestForgeNamesThePublishedKidButIsNotVerifiable(t *testing.T) {
	p := newIdP(t, idp.Options{})
	tok, err := p.Forge(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	_, h := parse(t, tok)
	if h["kid"] != p.KeyID(idp.RS256) {
		t.Fatalf("forged kid %v, want the published %s", h["kid"], p.KeyID(idp.RS256))
	}
	// The forging key is never published.
	if got := kids(getJWKS(t, p.Handler())); len(got) != 2 {
		t.Fatalf("JWKS after Forge has %v", got)
	}
}

func TestKeysPersistAcrossRestarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "idp")
	first := newIdP(t, idp.Options{StateDir: dir})
	want := kids(getJWKS(t, first.Handler()))
	for _, name := range []string{"rs256.pem", "es256.pem"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v, want 0600", name, fi.Mode().Perm())
		}
	}
	second := newIdP(t, idp.Options{StateDir: dir})
	if got := kids(getJWKS(t, second.Handler())); !slices.Equal(got, want) {
		t.Fatalf("kids after restart %v, want %v", got, want)
	}
	// A token minted before the restart still verifies with the restarted IdP's published key.
	tok, err := first.Mint(idp.Claims{OID: "alice", Alg: idp.ES256})
	if err != nil {
		t.Fatal(err)
	}
	tok2, err := second.Mint(idp.Claims{OID: "alice", Alg: idp.ES256})
	if err != nil {
		t.Fatal(err)
	}
	_, h1 := parse(t, tok)
	_, h2 := parse(t, tok2)
	if h1["kid"] != h2["kid"] {
		t.Fatalf("kid changed across restart: %v vs %v", h1["kid"], h2["kid"])
	}
	// Rotation persists too.
	if err := second.Rotate(idp.RS256); err != nil {
		t.Fatal(err)
	}
	third := newIdP(t, idp.Options{StateDir: dir})
	if third.KeyID(idp.RS256) != second.KeyID(idp.RS256) || third.KeyID(idp.RS256) == first.KeyID(idp.RS256) {
		t.Fatal("rotated key did not persist")
	}
	// Without a StateDir, every IdP has fresh keys.
	if a, b := newIdP(t, idp.Options{}), newIdP(t, idp.Options{}); a.KeyID(idp.RS256) == b.KeyID(idp.RS256) {
		t.Fatal("in-memory IdPs share a key")
	}
}

func TestCorruptStateFails(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rs256.pem"), []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := idp.New(idp.Options{StateDir: dir}); err == nil || !strings.Contains(err.Error(), "rs256.pem") {
		t.Fatalf("New over a corrupt key file: %v", err)
	}
}

func TestRotateKeepsOldKeyPublished(t *testing.T) {
	p := newIdP(t, idp.Options{})
	old := p.KeyID(idp.RS256)
	if err := p.Rotate(idp.RS256); err != nil {
		t.Fatal(err)
	}
	got := kids(getJWKS(t, p.Handler()))
	if p.KeyID(idp.RS256) == old || !slices.Contains(got, old) || !slices.Contains(got, p.KeyID(idp.RS256)) || len(got) != 3 {
		t.Fatalf("after rotate: current %s, old %s, published %v", p.KeyID(idp.RS256), old, got)
	}
}

func TestTokenEndpoint(t *testing.T) {
	p := newIdP(t, idp.Options{})
	h := p.Handler()
	t.Run("the issuer's own host", func(t *testing.T) {
		q := newIdP(t, idp.Options{Issuer: "http://idp.internal:8090"})
		r := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader(`{"oid":"alice"}`))
		r.RemoteAddr, r.Host = "127.0.0.1:5000", "IDP.internal:8090"
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		q.Handler().ServeHTTP(w, r)
		if w.Code != 200 {
			t.Fatalf("status %d: %s", w.Code, w.Body)
		}
	})
	post := func(remote, ct, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader(body))
		r.RemoteAddr = remote
		r.Host = "127.0.0.1:8090"
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	form := url.Values{"oid": {"alice"}, "scope": {"das read"}, "ttl_s": {"120"}, "alg": {"ES256"}}.Encode()
	for _, tt := range []struct {
		name, remote, ct, body string
		wantStatus             int
		wantErr                string
	}{
		{"form from IPv4 loopback", "127.0.0.1:5000", "application/x-www-form-urlencoded", form, 200, ""},
		{"JSON from IPv6 loopback", "[::1]:5000", "application/json", `{"oid":"alice","scope":"das read","ttl_s":120,"alg":"ES256"}`, 200, ""},
		{"from another host", "192.0.2.7:5000", "application/json", `{"oid":"alice"}`, 403, "access_denied"},
		{"IPv4-mapped non-loopback", "[::ffff:10.0.0.1]:5000", "application/json", `{"oid":"alice"}`, 403, "access_denied"},
		{"no oid", "127.0.0.1:5000", "application/json", `{"aud":"das"}`, 400, "invalid_request"},
		{"bad alg", "127.0.0.1:5000", "application/json", `{"oid":"a","alg":"HS256"}`, 400, "invalid_request"},
		{"unknown field", "127.0.0.1:5000", "application/json", `{"oid":"a","role":"admin"}`, 400, "invalid_request"},
		{"ttl too long", "127.0.0.1:5000", "application/x-www-form-urlencoded", "oid=a&ttl_s=999999", 400, "invalid_request"},
		{"bad expired", "127.0.0.1:5000", "application/x-www-form-urlencoded", "oid=a&expired=maybe", 400, "invalid_request"},
		{"text body", "127.0.0.1:5000", "text/plain", "oid=a", 400, "invalid_request"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := post(tt.remote, tt.ct, tt.body)
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.wantStatus, w.Body)
			}
			if w.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control = %q", w.Header().Get("Cache-Control"))
			}
			if tt.wantErr != "" {
				var e struct{ Error, ErrorDescription string }
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error != tt.wantErr {
					t.Fatalf("body %s, want error %s", w.Body, tt.wantErr)
				}
				if strings.Contains(w.Body.String(), "eyJ") {
					t.Fatal("error response carries a token")
				}
				return
			}
			var resp idp.TokenResponse
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
				t.Fatal(err)
			}
			c, hdr := parse(t, resp.AccessToken)
			if resp.TokenType != "Bearer" || resp.ExpiresIn != 120 || c["oid"] != "alice" || c["scope"] != "das read" || hdr["alg"] != "ES256" {
				t.Fatalf("response %+v, claims %v, header %v", resp, c, hdr)
			}
		})
	}
	t.Run("expired", func(t *testing.T) {
		w := post("127.0.0.1:1", "application/json", `{"oid":"alice","expired":true}`)
		var resp idp.TokenResponse
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
			t.Fatal(err)
		}
		c, _ := parse(t, resp.AccessToken)
		exp, _ := c.GetExpirationTime()
		if resp.ExpiresIn != 0 || !exp.Before(time.Now()) {
			t.Fatalf("expired token: expires_in %d, exp %v", resp.ExpiresIn, exp)
		}
	})
	t.Run("Host header", func(t *testing.T) {
		for host, want := range map[string]int{
			"127.0.0.1:8090": 200, "localhost:8090": 200, "LOCALHOST": 200, "[::1]:8090": 200, "127.1.2.3": 200,
			"evil.example:8090": 403, "evil.example": 403, "10.0.0.1:8090": 403, "localhost.evil.example": 403,
			"idp.internal:8090": 403,
		} {
			r := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader(`{"oid":"alice"}`))
			r.RemoteAddr, r.Host = "127.0.0.1:5000", host
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != want {
				t.Errorf("Host %q: status %d, want %d", host, w.Code, want)
			}
		}
	})
	t.Run("a web page of another origin", func(t *testing.T) {
		// A form another web site posts from the developer's browser: the site cannot read the
		// token, but the browser would mint one for whoever the site names.
		for _, tc := range []struct {
			headers map[string]string
			want    int
		}{
			{map[string]string{"Origin": "http://attacker.example", "Sec-Fetch-Site": "cross-site"}, 403},
			{map[string]string{"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "same-site"}, 403},
			{map[string]string{"Origin": "http://attacker.example"}, 403},
			{map[string]string{"Origin": "http://127.0.0.1:8090", "Sec-Fetch-Site": "same-origin"}, 200},
			{map[string]string{"Sec-Fetch-Site": "none"}, 200},
			{nil, 200},
		} {
			r := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader("oid=alice"))
			r.RemoteAddr, r.Host = "127.0.0.1:5000", "127.0.0.1:8090"
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("%v: status %d, want %d: %s", tc.headers, w.Code, tc.want, w.Body)
			}
			if tc.want == 403 && strings.Contains(w.Body.String(), "eyJ") {
				t.Errorf("%v: a refused request carries a token", tc.headers)
			}
		}
	})
	t.Run("GET is not allowed", func(t *testing.T) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/token?oid=alice", nil))
		if w.Code != http.StatusMethodNotAllowed {
			t.Fatalf("GET /token: %d", w.Code)
		}
	})
}

// POST /token mints the tenant it is given as the tid claim, so the dev stack can show that the
// same oid in another tenant is another identity; a tid given but empty, too long or holding a
// control character is an invalid_request, never a token without a tenant or with a mangled one.
func TestTokenEndpointTenant(t *testing.T) {
	p := newIdP(t, idp.Options{})
	post := func(ct, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader(body))
		r.RemoteAddr, r.Host = "127.0.0.1:5000", "127.0.0.1:8090"
		r.Header.Set("Content-Type", ct)
		w := httptest.NewRecorder()
		p.Handler().ServeHTTP(w, r)
		return w
	}
	const formCT, jsonCT = "application/x-www-form-urlencoded", "application/json"
	for _, tt := range []struct {
		name, ct, body string
		wantTID        any // nil: no tid claim
	}{
		{"form", formCT, "oid=alice&tid=conformance-other-tenant", "conformance-other-tenant"},
		{"JSON", jsonCT, `{"oid":"alice","tid":"T1"}`, "T1"},
		{"trimmed", formCT, url.Values{"oid": {"alice"}, "tid": {"  T1 "}}.Encode(), "T1"},
		{"a GUID", jsonCT, `{"oid":"alice","tid":"72f988bf-86f1-41af-91ab-2d7cd011db47"}`, "72f988bf-86f1-41af-91ab-2d7cd011db47"},
		{"not ASCII", jsonCT, `{"oid":"alice","tid":"Zürich Ω"}`, "Zürich Ω"},
		{"the longest", jsonCT, `{"oid":"alice","tid":"` + strings.Repeat("t", idp.MaxTIDLen) + `"}`, strings.Repeat("t", idp.MaxTIDLen)},
		{"form without", formCT, "oid=alice", nil},
		{"JSON without", jsonCT, `{"oid":"alice"}`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := post(tt.ct, tt.body)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			var resp idp.TokenResponse
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
				t.Fatal(err)
			}
			c, _ := parse(t, resp.AccessToken)
			if got, ok := c["tid"]; got != tt.wantTID || (tt.wantTID == nil) == ok {
				t.Fatalf("tid claim %v (present %v), want %v; claims %v", got, ok, tt.wantTID, c)
			}
			if c["oid"] != "alice" {
				t.Fatalf("oid claim %v", c["oid"])
			}
		})
	}
	for _, tt := range []struct{ name, ct, body, wantDesc string }{
		{"form empty", formCT, "oid=alice&tid=", "empty"},
		{"JSON empty", jsonCT, `{"oid":"alice","tid":""}`, "empty"},
		{"only spaces", jsonCT, `{"oid":"alice","tid":"   "}`, "empty"},
		{"too long", jsonCT, `{"oid":"alice","tid":"` + strings.Repeat("t", idp.MaxTIDLen+1) + `"}`, "at most 256 bytes"},
		{"control character", jsonCT, `{"oid":"alice","tid":"a\u0000b"}`, "printable"},
		{"newline", formCT, "oid=alice&tid=a%0Ab", "printable"},
		{"not UTF-8", formCT, "oid=alice&tid=a%FFb", "printable"},
		{"twice", formCT, "oid=alice&tid=T1&tid=T2", "once"},
		{"not a string", jsonCT, `{"oid":"alice","tid":7}`, "JSON object"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := post(tt.ct, tt.body)
			var e struct {
				Error       string `json:"error"`
				Description string `json:"error_description"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != http.StatusBadRequest || e.Error != "invalid_request" {
				t.Fatalf("status %d, body %s: want 400 invalid_request", w.Code, w.Body)
			}
			if !strings.Contains(e.Description, "tid") || !strings.Contains(e.Description, tt.wantDesc) {
				t.Fatalf("error_description %q: want it to name tid and say %q", e.Description, tt.wantDesc)
			}
		})
	}
}

// A minted tid reaches the service's identity: the validator puts it in the tenant, so the same
// oid with and without it are two identities.
func TestMintedTenantIsTheIdentitysTenant(t *testing.T) {
	s := idptest.Start(t)
	v, err := auth.New(t.Context(), s.Config(), auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := idp.RequestToken(t.Context(), s.HTTP.Client(), s.HTTP.URL, idp.TokenRequest{OID: "alice", TID: "T1"})
	if err != nil {
		t.Fatal(err)
	}
	in, err := v.Authenticate(t.Context(), tok)
	if err != nil {
		t.Fatal(err)
	}
	home, err := v.Authenticate(t.Context(), s.Token(t, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	if in.OID != "alice" || home.OID != "alice" || in.Tenant == home.Tenant || !strings.Contains(in.Tenant, `"T1"`) {
		t.Fatalf("tenants %q and %q: want alice in T1 to be another identity than alice", in.Tenant, home.Tenant)
	}
}

// Minting, rotating and publishing happen at once in a dev stack.
func TestConcurrentMintRotateJWKS(t *testing.T) {
	p := newIdP(t, idp.Options{})
	h := p.Handler()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for range 5 {
				if _, err := p.Mint(idp.Claims{OID: "alice", Alg: []string{"RS256", "ES256"}[i%2]}); err != nil {
					t.Error(err)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/.well-known/jwks.json", nil))
				if w.Code != http.StatusOK {
					t.Errorf("JWKS status %d", w.Code)
				}
			}
		})
	}
	wg.Go(func() {
		if err := p.Rotate(idp.ES256); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	if got := len(getJWKS(t, h).Keys); got != 3 {
		t.Fatalf("%d published keys after one rotation, want 3", got)
	}
}
