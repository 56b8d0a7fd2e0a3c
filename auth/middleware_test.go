package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/idp/idptest"
	"github.com/das-ask/ask/gen"
)

func TestMiddleware(t *testing.T) {
	s := idptest.Start(t)
	v := newValidator(t, s)
	var gotOID string
	h := auth.Middleware(v, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := auth.FromContext(r.Context())
		if !ok {
			t.Error("no identity in context")
		}
		gotOID = id.OID
		w.WriteHeader(http.StatusNoContent)
	}))
	good := s.Token(t, "alice")
	expired := mint(t, s, idp.Claims{OID: "alice", Expired: true})
	noScope := mint(t, s, idp.Claims{OID: "alice", Scope: "other"})

	tests := []struct {
		name       string
		header     string
		wantStatus int
		wantChall  string
		wantDetail string
	}{
		{"valid", "Bearer " + good, http.StatusNoContent, "", ""},
		{"scheme is case-insensitive", "bEaReR " + good, http.StatusNoContent, "", ""},
		{"no header", "", http.StatusUnauthorized, `Bearer realm="das"`, "a bearer token is required"},
		{"basic scheme", "Basic YWxpY2U6eA==", http.StatusUnauthorized, `Bearer realm="das"`, "a bearer token is required"},
		// "Bearer " with no token is a 400: TestMiddlewareMalformedBearer.
		{"garbage", "Bearer abc", http.StatusUnauthorized,
			`Bearer realm="das", error="invalid_token", error_description="token is malformed"`, "token is malformed"},
		{"expired", "Bearer " + expired, http.StatusUnauthorized,
			`Bearer realm="das", error="invalid_token", error_description="token is expired"`, "token is expired"},
		{"insufficient scope is 401 too", "Bearer " + noScope, http.StatusUnauthorized,
			`Bearer realm="das", error="insufficient_scope", error_description="token does not grant scope das"`, "token does not grant scope das"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotOID = ""
			r := httptest.NewRequest(http.MethodGet, "/v1/things", nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d", w.Code, tt.wantStatus)
			}
			if tt.wantStatus != http.StatusUnauthorized {
				if gotOID != "alice" {
					t.Fatalf("handler saw oid %q, want alice", gotOID)
				}
				return
			}
			if gotOID != "" {
				t.Fatal("handler ran for a rejected request")
			}
			if got := w.Header().Get("WWW-Authenticate"); got != tt.wantChall {
				t.Errorf("WWW-Authenticate = %q, want %q", got, tt.wantChall)
			}
			if got := w.Header().Get("Content-Type"); got != "application/problem+json" {
				t.Errorf("Content-Type = %q", got)
			}
			var p gen.Problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if p.Status != 401 || p.Title != "Unauthorized" || p.Type != "about:blank" || p.Detail == nil || *p.Detail != tt.wantDetail || p.Instance == nil || *p.Instance != "/v1/things" {
				t.Errorf("problem = %s", w.Body)
			}
			for _, tok := range []string{good, expired, noScope} {
				if strings.Contains(w.Body.String(), tok) || strings.Contains(w.Header().Get("WWW-Authenticate"), tok) {
					t.Error("response contains a token")
				}
			}
		})
	}
}

func TestBearerToken(t *testing.T) {
	for _, tt := range []struct {
		header, want string
		ok           bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER  abc ", "abc", true},
		{"Bearerabc", "", false},
		{"Token abc", "", false},
		{"Bearer", "", false},
		{"", "", false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if tt.header != "" {
			r.Header.Set("Authorization", tt.header)
		}
		got, ok := auth.BearerToken(r)
		if got != tt.want || ok != tt.ok {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
	// Two Authorization headers, good then bad or bad then good: neither is taken.
	for _, pair := range [][2]string{{"Bearer good", "Bearer bad"}, {"Bearer bad", "Bearer good"}} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Add("Authorization", pair[0])
		r.Header.Add("Authorization", pair[1])
		if got, ok := auth.BearerToken(r); ok {
			t.Errorf("BearerToken of two headers %q = %q, true; want none", pair, got)
		}
	}
}

type authFunc func(context.Context, string) (ask.Identity, error)

func (f authFunc) Authenticate(ctx context.Context, tok string) (ask.Identity, error) {
	return f(ctx, tok)
}

// Middleware works with any ask.Authenticator; an error that is not an *auth.Error says nothing
// of itself to the caller, and a description never breaks out of its quoted-string.
func TestMiddlewareForeignErrors(t *testing.T) {
	for _, tt := range []struct {
		err        error
		wantChall  string
		wantDetail string
	}{
		{errors.New(`secret internals "quoted"`), `Bearer realm="das", error="invalid_token", error_description="token is invalid"`, "token is invalid"},
		{&auth.Error{Code: auth.CodeInvalidToken, Description: "bad \"kid\" \\ é\n"}, `Bearer realm="das", error="invalid_token", error_description="bad  kid      "`, "bad \"kid\" \\ é\n"},
	} {
		h := auth.Middleware(authFunc(func(context.Context, string) (ask.Identity, error) { return ask.Identity{}, tt.err }),
			http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("handler ran") }))
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer x")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var p gen.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		if got := w.Header().Get("WWW-Authenticate"); w.Code != 401 || got != tt.wantChall || p.Detail == nil || *p.Detail != tt.wantDetail {
			t.Errorf("status %d, challenge %q, body %s", w.Code, got, w.Body)
		}
	}
}

// An Authorization header naming the Bearer scheme with no token after a space is a 400 with
// an invalid_request challenge, as the ask service answers it: bearer authentication attempted,
// malformed, not a request without credentials.
func TestMiddlewareMalformedBearer(t *testing.T) {
	s := idptest.Start(t)
	v := newValidator(t, s)
	h := auth.Middleware(v, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("handler ran for a malformed bearer")
	}))
	good := s.Token(t, "alice")
	for header, want := range map[string]int{"Bearer": 400, "Bearer ": 400, "BEARER \t ": 400, "Bearer\t" + good: 400, "Basic abc": 401} {
		r := httptest.NewRequest(http.MethodGet, "/v1/things", nil)
		r.Header.Set("Authorization", header)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		chall := w.Header().Get("WWW-Authenticate")
		if w.Code != want || (want == 400) != strings.Contains(chall, `error="invalid_request"`) {
			t.Errorf("%q: status %d, challenge %q; want %d", header, w.Code, chall, want)
		}
		if strings.Contains(w.Body.String(), good) {
			t.Errorf("%q: the response holds the token", header)
		}
	}
}

// Two Authorization headers, whichever is good, are a 400 with an invalid_request challenge
// (RFC 6750 §3.1), as the ask service answers them (docs/decisions.md): the request carries
// credentials, just not one, so a bare `Bearer realm="das"` (no credentials sent) is untrue.
func TestMiddlewareTwoAuthorizationHeaders(t *testing.T) {
	s := idptest.Start(t)
	v := newValidator(t, s)
	h := auth.Middleware(v, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("handler ran for a request with two Authorization headers")
	}))
	good := s.Token(t, "alice")
	for _, pair := range [][2]string{{"Bearer " + good, "Bearer abc"}, {"Bearer abc", "Bearer " + good}, {"Bearer " + good, "Bearer " + good}} {
		r := httptest.NewRequest(http.MethodGet, "/v1/things", nil)
		r.Header.Add("Authorization", pair[0])
		r.Header.Add("Authorization", pair[1])
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusBadRequest {
			t.Errorf("status = %d, want 400", w.Code)
		}
		const wantChall = `Bearer realm="das", error="invalid_request", error_description="more than one Authorization header"`
		if got := w.Header().Get("WWW-Authenticate"); got != wantChall {
			t.Errorf("WWW-Authenticate = %q, want %q", got, wantChall)
		}
		if got := w.Header().Get("Content-Type"); got != "application/problem+json" {
			t.Errorf("Content-Type = %q", got)
		}
		var p gen.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatalf("body %q: %v", w.Body, err)
		}
		if p.Status != 400 || p.Title != "Bad Request" || p.Detail == nil {
			t.Errorf("problem = %s", w.Body)
		}
		if strings.Contains(w.Body.String(), good) {
			t.Error("response contains the token")
		}
	}
}

// ResourceMiddleware is Middleware for an MCP server: every challenge names the resource's
// metadata and the scope, and a token without the scope is a 403 (RFC 6750 §3.1), not a 401.
func TestResourceMiddleware(t *testing.T) {
	s := idptest.Start(t)
	v := newValidator(t, s)
	h := auth.ResourceMiddleware(v, auth.ResourceOptions{
		MetadataURL: func(r *http.Request) string { return "https://" + r.Host + "/.well-known/oauth-protected-resource/mcp" },
		Scope:       "das",
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	const params = `resource_metadata="https://rs.example/.well-known/oauth-protected-resource/mcp", scope="das"`
	for _, tt := range []struct {
		name      string
		headers   []string
		status    int
		wantChall string
	}{
		{"valid", []string{"Bearer " + s.Token(t, "alice")}, http.StatusNoContent, ""},
		{"no token", nil, http.StatusUnauthorized, `Bearer realm="das", ` + params},
		{"expired", []string{"Bearer " + mint(t, s, idp.Claims{OID: "alice", Expired: true})}, http.StatusUnauthorized,
			`Bearer realm="das", ` + params + `, error="invalid_token", error_description="token is expired"`},
		{"without the scope", []string{"Bearer " + mint(t, s, idp.Claims{OID: "alice", Scope: "other"})}, http.StatusForbidden,
			`Bearer realm="das", ` + params + `, error="insufficient_scope", error_description="token does not grant scope das"`},
		{"two headers", []string{"Bearer a", "Bearer b"}, http.StatusBadRequest,
			`Bearer realm="das", ` + params + `, error="invalid_request", error_description="more than one Authorization header"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "https://rs.example/mcp", nil)
			for _, h := range tt.headers {
				r.Header.Add("Authorization", h)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.status || w.Header().Get("WWW-Authenticate") != tt.wantChall {
				t.Errorf("%d %q, want %d %q", w.Code, w.Header().Get("WWW-Authenticate"), tt.status, tt.wantChall)
			}
			var p gen.Problem
			if tt.status != http.StatusNoContent && (json.Unmarshal(w.Body.Bytes(), &p) != nil || p.Status != tt.status) {
				t.Errorf("problem %s", w.Body)
			}
		})
	}
}

// TestMiddlewareInstanceIsAURIReference: the 401's instance is the path as the request escaped
// it (RFC 9457 §3.1.5: a URI reference); the decoded path turned `%3C` into `<` and `%2F` into
// a `/` that names another resource.
func TestMiddlewareInstanceIsAURIReference(t *testing.T) {
	s := idptest.Start(t)
	h := auth.Middleware(newValidator(t, s), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, path := range []string{"/mcp", "/a%2Fb", "/%3Cx%3E", "/a%20b"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		var p gen.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != http.StatusUnauthorized {
			t.Fatalf("GET %s: %d %q: %v", path, w.Code, w.Body, err)
		}
		if p.Instance == nil || *p.Instance != path {
			t.Errorf("GET %s: problem %s; want instance %q", path, w.Body, path)
		}
	}
}
