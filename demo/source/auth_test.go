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
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", resp.StatusCode)
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
}
