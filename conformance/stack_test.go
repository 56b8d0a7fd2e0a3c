package conformance_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/conformance"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/server"
)

// testStack is the real ask service with the real validator and dev IdP, running a scripted
// runner, on loopback.
type testStack struct {
	AskURL, IdPURL, AuditURL string
	IdP                      *idp.IdP
	KeepAlive, SlowWait      time.Duration
}

func startStack(t *testing.T) *testStack {
	t.Helper()
	st := &testStack{KeepAlive: 150 * time.Millisecond, SlowWait: 700 * time.Millisecond}

	idpMux := http.NewServeMux()
	idpSrv := httptest.NewServer(idpMux)
	t.Cleanup(idpSrv.Close)
	p, err := idp.New(idp.Options{Issuer: idpSrv.URL})
	if err != nil {
		t.Fatal(err)
	}
	idpMux.Handle("/", p.Handler())
	st.IdP, st.IdPURL = p, idpSrv.URL

	audit := &auditLog{}
	auditSrv := httptest.NewServer(audit)
	t.Cleanup(auditSrv.Close)
	st.AuditURL = auditSrv.URL

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	v, err := auth.New(ctx, auth.Config{
		JWKSURL: p.JWKSURL(), Issuer: p.Issuer(), Audience: "das", RequiredScope: "das",
		Algorithms: []string{"RS256", "ES256"},
	}, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Options{
		Runner:        &scriptedRunner{audit: audit, slowWait: st.SlowWait},
		Authenticator: v,
		BasePath:      "/ask",
		MaxEvents:     8,
		KeepAlive:     st.KeepAlive,
		ShutdownGrace: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	askSrv := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		_ = srv.Shutdown(context.Background())
		askSrv.Close()
	})
	st.AskURL = askSrv.URL + "/ask"
	return st
}

// config is the suite's configuration for a target at base (the stack, or a proxy in front of it).
func (st *testStack) config(base string) conformance.Config {
	return conformance.Config{
		BaseURL:    base,
		Tokens:     conformance.IdPTokens{URL: st.IdPURL},
		AuditURL:   st.AuditURL,
		Behaviour:  true,
		KeepAlive:  st.KeepAlive,
		SlowWait:   st.SlowWait,
		RunTimeout: 20 * time.Second,
	}
}
