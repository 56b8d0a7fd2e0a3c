package source_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/idp/idptest"
	"github.com/das-ask/ask/demo/source"
)

// TestBearerValidation runs the source with the real validator against an in-process identity
// provider: only its properly minted tokens reach a tool, and the identity they name is the one
// the permissions and the audit log see.
func TestBearerValidation(t *testing.T) {
	p := idptest.Start(t)
	v, err := auth.New(t.Context(), p.Config(), auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, srv := start(t, source.Options{Authenticator: v})

	mint := func(c idp.Claims) string {
		tok, err := p.Mint(c)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	forged, err := p.Forge(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{
		"none":           "",
		"garbage":        "not-a-jwt",
		"expired":        mint(idp.Claims{OID: "alice", Expired: true}),
		"wrong audience": mint(idp.Claims{OID: "alice", Audience: "someone-else"}),
		"wrong scope":    mint(idp.Claims{OID: "alice", Scope: "other"}),
		"forged":         forged,
	} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/mcp",
				strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := http.StatusUnauthorized
			if name == "wrong scope" {
				want = http.StatusForbidden // RFC 6750 §3.1, as MCP asks: see TestProtectedResourceMetadata
			}
			if resp.StatusCode != want {
				t.Errorf("status %d, want %d", resp.StatusCode, want)
			}
			if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q", resp.Header.Get("WWW-Authenticate"))
			}
			if _, err := dial(t.Context(), srv, tok); err == nil {
				t.Errorf("an MCP session opened with this token")
			}
		})
	}

	t.Run("valid tokens carry their identity", func(t *testing.T) {
		for _, alg := range []string{idp.RS256, idp.ES256} {
			bob := connect(t, srv, mint(idp.Claims{OID: "bob", Alg: alg}))
			res := call(t, bob, "v-"+alg, "run_query", map[string]any{"sql": "SELECT * FROM oncall_pay"})
			if refusal(res) != source.CodeForbidden {
				t.Errorf("%s: bob's query: %s, want a forbidden refusal", alg, text(res))
			}
			if got := auditEntries(t, srv, "call_id=v-"+alg); len(got) != 1 || got[0].OID != "bob" || !got[0].Refused {
				t.Errorf("%s: audit = %+v", alg, got)
			}
		}
		alice := connect(t, srv, mint(idp.Claims{OID: "alice"}))
		if res := call(t, alice, "v-alice", "run_query", map[string]any{"sql": "SELECT * FROM oncall_pay"}); res.IsError {
			t.Errorf("alice's query: %s", text(res))
		}
	})

	t.Run("a session cannot change hands", func(t *testing.T) {
		// Open a session as alice, then send a call on it with bob's token: the SDK's guard
		// rejects it, so bob can never act under alice's permissions.
		alice := connect(t, srv, mint(idp.Claims{OID: "alice"}))
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"list_tables","arguments":{}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", alice.ID())
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		req.Header.Set("Authorization", "Bearer "+mint(idp.Claims{OID: "bob"}))
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("bob drove alice's session: %s", resp.Status)
		}
	})

	// The identity is the oid within its tenant (the issuer and the token's tid): alice of
	// another tid is someone else. Until 2026-12-06 the source knew the oid alone: a token for
	// oid=alice, tid=T1 drove alice's session (200), read oncall_pay as alice may, and its audit
	// line named plain alice.
	t.Run("the same oid of another tenant is someone else", func(t *testing.T) {
		home := connect(t, srv, mint(idp.Claims{OID: "alice"}))
		other := mint(idp.Claims{OID: "alice", TID: "T1"})
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"list_tables","arguments":{}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", home.ID())
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		req.Header.Set("Authorization", "Bearer "+other)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("alice of tid T1 on alice's session: %s, want 403", resp.Status)
		}

		// In a session of its own, it gets anyone else's permissions, and its audit line says who.
		res := call(t, connect(t, srv, other), "t1-alice", "run_query", map[string]any{"sql": "SELECT * FROM oncall_pay"})
		if refusal(res) != source.CodeForbidden {
			t.Errorf("alice of tid T1 read oncall_pay: %s, want a forbidden refusal", text(res))
		}
		if got := auditEntries(t, srv, "call_id=t1-alice"); len(got) != 1 || got[0].OID != "alice" || got[0].Tenant != p.Issuer()+` tid="T1"` {
			t.Errorf("audit = %+v, want alice in tenant %s tid=\"T1\"", got, p.Issuer())
		}
		if res := call(t, home, "home-alice", "run_query", map[string]any{"sql": "SELECT * FROM oncall_pay"}); res.IsError {
			t.Errorf("the demo's alice: %s", text(res))
		}
		if got := auditEntries(t, srv, "call_id=home-alice"); len(got) != 1 || got[0].OID != "alice" || got[0].Tenant != p.Issuer() {
			t.Errorf("audit = %+v, want alice in tenant %s", got, p.Issuer())
		}
	})
}
