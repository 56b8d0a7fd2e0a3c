package auth_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
)

// An https DAS_JWKS_URL keeps the keys' integrity: a redirect from it to plain http is not
// followed, for whoever is on the path of that http request (or a forward proxy from the
// environment, which sees plain http whole) could answer with keys of its own and mint any
// identity. The fetch fails as any other does (no keys are loaded; held keys are kept). A
// redirect that stays on https is followed, as before.
func TestJWKSRedirectToPlainHTTPIsNotFollowed(t *testing.T) {
	const issuer = "https://idp.test"
	p, err := idp.New(idp.Options{Issuer: issuer})
	if err != nil {
		t.Fatal(err)
	}
	set, err := p.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := p.Mint(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, target string
		want         bool
	}{
		{"https to http", "http://idp.test/keys", false},
		{"https to http on another host", "http://keys.example/keys", false},
		{"https to https on another host", "https://keys.example/keys", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var served []string
			tr := roundTripFunc(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				served = append(served, r.URL.String())
				mu.Unlock()
				if r.URL.Path == "/jwks" {
					return &http.Response{StatusCode: http.StatusFound, Header: http.Header{"Location": {tt.target}},
						Body: http.NoBody, Request: r}, nil
				}
				return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
					Body: ioNopCloser(string(set)), ContentLength: int64(len(set)), Request: r}, nil
			})
			v, err := auth.New(t.Context(), auth.Config{JWKSURL: issuer + "/jwks", Issuer: issuer, Audience: "das", RequiredScope: "das"},
				auth.Options{HTTPClient: &http.Client{Transport: tr}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Authenticate(t.Context(), tok)
			mu.Lock()
			defer mu.Unlock()
			if got := v.Ready() && err == nil; got != tt.want {
				t.Errorf("redirected to %s: keys loaded and token accepted = %v (Ready %v, err %v), want %v; requests %v",
					tt.target, got, v.Ready(), err, tt.want, served)
			}
			for _, u := range served {
				if !tt.want && strings.HasPrefix(u, "http:") {
					t.Errorf("the plain-http target was asked: %v", served)
				}
			}
		})
	}
}

func ioNopCloser(s string) *nopBody { return &nopBody{strings.NewReader(s)} }

type nopBody struct{ *strings.Reader }

func (nopBody) Close() error { return nil }
