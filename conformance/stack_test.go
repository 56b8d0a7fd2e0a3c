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
	// OverflowURL is a second service on the same IdP, runner and audit log, whose buffer
	// (8 events) is smaller than a run.
	OverflowURL         string
	IdP                 *idp.IdP
	KeepAlive, SlowWait time.Duration
}

// The test stack's timings: keep-alives several times during the slow question's silent wait.
const (
	testKeepAlive = 150 * time.Millisecond
	testSlowWait  = 700 * time.Millisecond
)

func startStack(t *testing.T) *testStack {
	t.Helper()
	st := &testStack{KeepAlive: testKeepAlive, SlowWait: testSlowWait}

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
	runner := &scriptedRunner{audit: audit, slowWait: st.SlowWait}
	serve := func(maxEvents int) string {
		srv, err := server.New(server.Options{
			Runner:        runner,
			Authenticator: v,
			BasePath:      "/ask",
			MaxEvents:     maxEvents,
			KeepAlive:     st.KeepAlive,
			ShutdownGrace: -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(func() {
			_ = srv.Shutdown(context.Background())
			hs.Close()
		})
		return hs.URL + "/ask"
	}
	st.AskURL, st.OverflowURL = serve(0), serve(8)
	return st
}

// config is the suite's configuration for a target at base and overflow (the stack's, or
// proxies in front of them).
func (st *testStack) config(base, overflow string) conformance.Config {
	return conformance.Config{
		BaseURL:     base,
		OverflowURL: overflow,
		Tokens:      conformance.IdPTokens{URL: st.IdPURL},
		AuditURL:    st.AuditURL,
		Behaviour:   true,
		KeepAlive:   st.KeepAlive,
		SlowWait:    st.SlowWait,
		RunTimeout:  20 * time.Second,
	}
}
