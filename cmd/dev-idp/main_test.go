package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/goleak"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/demo/idp/idptest"
	"github.com/das-ask/ask/internal/loopback"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, &out, &errb, config.MapEnv(nil))
	return code, out.String(), errb.String()
}

func TestTokenAgainstIdP(t *testing.T) {
	s := idptest.Start(t)
	v, err := auth.New(t.Context(), s.Config(), auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "token", "--oid", "bob", "--alg", "ES256", "--ttl", "2m", "--scope", "das read", "--idp", s.HTTP.URL)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("stdout %q: want exactly one line", out)
	}
	tok := strings.TrimSuffix(out, "\n")
	id, err := v.Authenticate(t.Context(), tok)
	if err != nil {
		t.Fatalf("minted token rejected: %v", err)
	}
	c := jwt.MapClaims{}
	parsed, _, err := jwt.NewParser().ParseUnverified(tok, c)
	if err != nil {
		t.Fatal(err)
	}
	exp, _ := c.GetExpirationTime()
	iat, _ := c.GetIssuedAt()
	if id.OID != "bob" || parsed.Header["alg"] != "ES256" || c["scope"] != "das read" || exp.Sub(iat.Time).Minutes() != 2 {
		t.Fatalf("token: oid %q, header %v, claims %v", id.OID, parsed.Header, c)
	}

	code, out, errOut = runCmd(t, "token", "--oid", "alice", "--tid", "T1", "--idp", s.HTTP.URL)
	if code != 0 {
		t.Fatalf("--tid: exit %d, %s", code, errOut)
	}
	if id, err := v.Authenticate(t.Context(), strings.TrimSpace(out)); err != nil || id.OID != "alice" || !strings.Contains(id.Tenant, `"T1"`) {
		t.Fatalf("--tid T1: identity %+v, %v; want alice in tenant T1", id, err)
	}

	code, out, errOut = runCmd(t, "token", "--oid", "alice", "--expired", "--idp", s.HTTP.URL)
	if code != 0 {
		t.Fatalf("--expired: exit %d, %s", code, errOut)
	}
	if _, err := v.Authenticate(t.Context(), strings.TrimSpace(out)); err == nil {
		t.Fatal("--expired token accepted")
	}
}

func TestTokenErrors(t *testing.T) {
	s := idptest.Start(t)
	closed := "http://" + loopback.Refused(t)
	for _, tt := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"no oid", []string{"token", "--idp", s.HTTP.URL}, 2, "--oid is required"},
		{"bad ttl", []string{"token", "--oid", "a", "--ttl", "1500ms", "--idp", s.HTTP.URL}, 2, "--ttl 1.5s"},
		{"ttl too long", []string{"token", "--oid", "a", "--ttl", "48h", "--idp", s.HTTP.URL}, 2, "--ttl 48h0m0s"},
		{"stray argument", []string{"token", "--oid", "a", "extra"}, 2, `unexpected argument "extra"`},
		// A wait that is no wait: it failed as "context deadline exceeded", as if the IdP were slow.
		{"bad timeout", []string{"token", "--oid", "a", "--timeout", "-1s", "--idp", s.HTTP.URL}, 2, "--timeout -1s: want a positive duration"},
		{"bad alg", []string{"token", "--oid", "a", "--alg", "HS256", "--idp", s.HTTP.URL}, 1, "invalid_request: alg must be RS256 or ES256"},
		{"IdP not running", []string{"token", "--oid", "a", "--idp", closed}, 1, "no identity provider at " + closed + ": start the dev stack (make ask-serve)"},
		{"no command", nil, 2, "usage:"},
		{"unknown command", []string{"mint"}, 2, `unknown command "mint"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, tt.args...)
			if code != tt.wantCode || out != "" || !strings.Contains(errOut, tt.wantErr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, no stdout, stderr with %q", code, out, errOut, tt.wantCode, tt.wantErr)
			}
		})
	}
}

// TestHelp: -h after a command prints that command's flags and exits 0 (it exited 2, a usage
// error, for asking), and the usage names every flag of token.
func TestHelp(t *testing.T) {
	for _, cmd := range []string{"token", "serve"} {
		code, _, errOut := runCmd(t, cmd, "-h")
		if code != 0 || !strings.Contains(errOut, "Usage of dev-idp "+cmd) {
			t.Errorf("dev-idp %s -h: exit %d, stderr %q; want 0 and its flags", cmd, code, errOut)
		}
	}
	_, out, _ := runCmd(t, "-h")
	for _, f := range []string{"--oid", "--aud", "--scope", "--ttl", "--expired", "--alg", "--idp", "--timeout", "--tid"} {
		if !strings.Contains(out, f) {
			t.Errorf("dev-idp -h says nothing of token's %s:\n%s", f, out)
		}
	}
}

// serve answers until its context ends, then shuts down cleanly; its keys survive a restart.
func TestServe(t *testing.T) {
	state := filepath.Join(t.TempDir(), "idp")
	kid := ""
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + ln.Addr().String()
		ctx, cancel := context.WithCancel(t.Context())
		var logs bytes.Buffer
		done := make(chan error, 1)
		go func() { done <- serve(ctx, ln, "", state, slog.New(slog.NewTextHandler(&logs, nil))) }()

		code, out, errOut := runCmd(t, "token", "--oid", "alice", "--idp", base)
		if code != 0 {
			t.Fatalf("token: exit %d, %s", code, errOut)
		}
		tok := strings.TrimSpace(out)
		parsed, _, err := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims{})
		if err != nil {
			t.Fatal(err)
		}
		if iss, _ := parsed.Claims.GetIssuer(); iss != base {
			t.Fatalf("iss %q, want %q", iss, base)
		}
		got, _ := parsed.Header["kid"].(string)
		if kid != "" && got != kid {
			t.Fatalf("kid %q after restart, want %q", got, kid)
		}
		kid = got
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("serve: %v", err)
		}
		if strings.Contains(logs.String(), tok) || !strings.Contains(logs.String(), "idp: token minted") {
			t.Fatalf("serve log:\n%s", logs.String())
		}
	}
	if fi, err := os.Stat(filepath.Join(state, "rs256.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v", fi, err)
	}
}

func TestServeBadAddr(t *testing.T) {
	code, _, errOut := runCmd(t, "serve", "--addr", "127.0.0.1:notaport")
	if code != 1 || !strings.Contains(errOut, "dev-idp serve:") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

// TestTokenAsksTheIdPInASK_IDP: without --idp, dev-idp token asks the IdP at $ASK_IDP, the one
// the ask CLI mints from; it asked 127.0.0.1:8090, and a caller who had exported ASK_IDP for a
// stack on other addresses was told no identity provider ran. --idp still wins.
func TestTokenAsksTheIdPInASK_IDP(t *testing.T) {
	s := idptest.Start(t)
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"token", "--oid", "bob"}, &out, &errb, config.MapEnv(map[string]string{"ASK_IDP": s.HTTP.URL})); code != 0 || strings.Count(out.String(), ".") != 2 {
		t.Fatalf("ASK_IDP=%s dev-idp token: exit %d, stdout %q, stderr %q", s.HTTP.URL, code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	env := config.MapEnv(map[string]string{"ASK_IDP": "http://127.0.0.1:1"})
	if code := run(t.Context(), []string{"token", "--oid", "bob", "--idp", s.HTTP.URL}, &out, &errb, env); code != 0 {
		t.Fatalf("--idp beside ASK_IDP: exit %d, stderr %q", code, errb.String())
	}
}
