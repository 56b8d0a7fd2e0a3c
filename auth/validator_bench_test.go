package auth_test

import (
	"net/http/httptest"
	"testing"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
)

// BenchmarkAuthenticate is validating a bearer whose signing key is already cached: the cost
// every request pays (signature, claims, scope), per algorithm.
func BenchmarkAuthenticate(b *testing.B) {
	srv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + srv.Listener.Addr().String()
	p, err := idp.New(idp.Options{Issuer: issuer})
	if err != nil {
		b.Fatal(err)
	}
	srv.Config.Handler = p.Handler()
	srv.Start()
	defer srv.Close()
	v, err := auth.New(b.Context(), auth.Config{
		JWKSURL: issuer + "/.well-known/jwks.json", Issuer: issuer,
		Audience: idp.DefaultAudience, RequiredScope: idp.DefaultScope,
	}, auth.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, alg := range []string{"RS256", "ES256"} {
		b.Run(alg, func(b *testing.B) {
			tok, err := p.Mint(idp.Claims{OID: "alice", Alg: alg})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := v.Authenticate(b.Context(), tok); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Authenticate(b.Context(), tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
