package auth_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
)

// A JWKS response's header is bounded (64 KiB) as its body is (1 MiB): net/http alone read up
// to 10 MiB of header lines into memory on every fetch. A JWKS answered with 1 MiB of header
// lines fails like any other fetch; the same keys with a few lines load.
func TestJWKSResponseHeaderIsBounded(t *testing.T) {
	const issuer = "http://idp.test"
	p, err := idp.New(idp.Options{Issuer: issuer})
	if err != nil {
		t.Fatal(err)
	}
	set, err := p.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		lines     int
		wantReady bool
	}{{8, true}, {1 << 10, false}} {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for range tt.lines {
				w.Header().Add("X-Padding", strings.Repeat("a", 1<<10))
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write(set)
		}))
		v, err := auth.New(t.Context(), auth.Config{JWKSURL: hs.URL, Issuer: issuer, Audience: "das"}, auth.Options{})
		hs.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := v.Ready(); got != tt.wantReady {
			t.Errorf("JWKS with %d KiB of header lines: Ready %v, want %v", tt.lines, got, tt.wantReady)
		}
	}
}
