package auth_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
)

// A net/http server guarded by Middleware, against a development IdP on loopback.
func ExampleMiddleware() {
	srv := httptest.NewUnstartedServer(nil)
	p, err := idp.New(idp.Options{Issuer: "http://" + srv.Listener.Addr().String()})
	if err != nil {
		panic(err)
	}
	srv.Config.Handler = p.Handler()
	srv.Start()
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // stops the validator's background JWKS refresh
	v, err := auth.New(ctx, auth.Config{
		JWKSURL: p.JWKSURL(), Issuer: p.Issuer(), Audience: "das", RequiredScope: "das",
	}, auth.Options{})
	if err != nil {
		panic(err)
	}
	h := auth.Middleware(v, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := auth.FromContext(r.Context())
		fmt.Fprintf(w, "hello %s", id.OID)
	}))

	alice, _ := p.Mint(idp.Claims{OID: "alice"})
	expired, _ := p.Mint(idp.Claims{OID: "alice", Expired: true})
	for _, header := range []string{"Bearer " + alice, "", "Bearer " + expired} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code == http.StatusOK {
			fmt.Println(w.Code, w.Body)
		} else {
			fmt.Println(w.Code, w.Header().Get("WWW-Authenticate"))
		}
	}
	// Output:
	// 200 hello alice
	// 401 Bearer realm="das"
	// 401 Bearer realm="das", error="invalid_token", error_description="token is expired"
}
