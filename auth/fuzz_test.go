package auth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
)

// FuzzBearer sends arbitrary Authorization headers through Middleware over a validator whose
// JWKS is served in memory. Promises for every input: no panic; no hang (each request is
// bounded by a short context, as a server's request context would be); the request is admitted
// only for an unmodified-claims token of the one identity the IdP minted; every rejection is a
// 401 problem+json with a WWW-Authenticate challenge that stays a valid quoted-string and
// never echoes the token.
func FuzzBearer(f *testing.F) {
	const issuer = "http://idp.fuzz"
	p, err := idp.New(idp.Options{Issuer: issuer})
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	tr := &handlerTransport{h: p.Handler()}
	v, err := auth.New(ctx, auth.Config{JWKSURL: p.JWKSURL(), Issuer: issuer, Audience: "das", RequiredScope: "das"},
		auth.Options{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		f.Fatal(err)
	}
	good, err := p.Mint(idp.Claims{OID: "fuzz-alice"})
	if err != nil {
		f.Fatal(err)
	}
	es, err := p.Mint(idp.Claims{OID: "fuzz-alice", Alg: idp.ES256})
	if err != nil {
		f.Fatal(err)
	}
	forged, err := p.Forge(idp.Claims{OID: "fuzz-alice"})
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{
		"Bearer " + good, "bearer " + es, "Bearer " + forged, "Bearer " + good + "x",
		"Bearer " + strings.Replace(good, ".", "..", 1), "Basic " + good, "Bearer", "Bearer ", "",
		"Bearer a.b.c", "Bearer eyJhbGciOiJub25lIn0.e30.", "Bearer \"quoted\\\"", "Bearer " + strings.Repeat("A", 9000),
	} {
		f.Add(s)
	}

	var admitted string
	h := auth.Middleware(v, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := auth.FromContext(r.Context())
		if !ok {
			http.Error(w, "no identity", http.StatusInternalServerError)
			return
		}
		admitted = id.OID + "|" + id.Tenant
		w.WriteHeader(http.StatusNoContent)
	}))

	f.Fuzz(func(t *testing.T, header string) {
		admitted = ""
		rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer rcancel()
		req := httptest.NewRequestWithContext(rctx, http.MethodGet, "http://ask.test/x", nil)
		req.Header["Authorization"] = []string{header}
		w := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(w, req)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("one request took %s", d)
		}
		switch w.Code {
		case http.StatusNoContent:
			if admitted != "fuzz-alice|"+issuer {
				t.Fatalf("admitted %q", admitted)
			}
			tok, _ := auth.BearerToken(req)
			if !sameClaims(tok, good) && !sameClaims(tok, es) {
				t.Fatalf("admitted a token whose header or claims differ from any minted one")
			}
		case http.StatusBadRequest, http.StatusUnauthorized:
			// A 400 only for bearer authentication attempted without a token to take.
			if _, bad := auth.Credential(req); w.Code == http.StatusBadRequest && bad == nil {
				t.Fatalf("400 for a header that is no malformed bearer")
			}
			ch := w.Header().Get("WWW-Authenticate")
			if !strings.HasPrefix(ch, `Bearer realm="das"`) {
				t.Fatalf("challenge %q", ch)
			}
			for _, c := range ch {
				if c < 0x20 || c > 0x7e {
					t.Fatalf("challenge has a byte outside printable ASCII: %q", ch)
				}
			}
			if w.Header().Get("Content-Type") != "application/problem+json" {
				t.Fatalf("%d with Content-Type %q", w.Code, w.Header().Get("Content-Type"))
			}
			if tok, ok := auth.BearerToken(req); ok && len(tok) >= 8 && (strings.Contains(w.Body.String(), tok) || strings.Contains(ch, tok)) {
				t.Fatalf("the 401 echoes the token")
			}
		default:
			t.Fatalf("status %d", w.Code)
		}
	})
}

// FuzzAuthenticate gives arbitrary token strings straight to the validator: every error is an
// *auth.Error with an RFC 6750 code and a description that does not contain the token.
func FuzzAuthenticate(f *testing.F) {
	const issuer = "http://idp.fuzz"
	p, err := idp.New(idp.Options{Issuer: issuer})
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	v, err := auth.New(ctx, auth.Config{JWKSURL: p.JWKSURL(), Issuer: issuer, Audience: "das"},
		auth.Options{HTTPClient: &http.Client{Transport: &handlerTransport{h: p.Handler()}}})
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range []idp.Claims{{OID: "a"}, {OID: "a", Expired: true}, {OID: ""}, {OID: "a", Audience: "other"}, {OID: "a", Issuer: "http://evil"}} {
		tok, err := p.Mint(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(tok)
	}
	f.Add("")
	f.Add("...")
	f.Add("e30.e30.e30")
	f.Fuzz(func(t *testing.T, tok string) {
		rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer rcancel()
		id, err := v.Authenticate(rctx, tok)
		if err == nil {
			if id.OID != "a" || id.Tenant != issuer || id.Token != tok {
				t.Fatalf("accepted identity %v tenant %q", id, id.Tenant)
			}
			return
		}
		var e *auth.Error
		if !errors.As(err, &e) || (e.Code != auth.CodeInvalidToken && e.Code != auth.CodeInsufficientScope) || e.Description == "" {
			t.Fatalf("error %v is not an *auth.Error with an RFC 6750 code", err)
		}
		if len(tok) >= 8 && strings.Contains(e.Error(), tok) {
			t.Fatalf("error text contains the token")
		}
	})
}

// sameClaims reports whether two compact JWTs carry the same header and payload segments.
func sameClaims(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	return len(pa) == 3 && len(pb) == 3 && pa[0] == pb[0] && pa[1] == pb[1]
}
