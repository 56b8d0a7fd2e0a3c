package hardening_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/stack"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/openapi"
	"github.com/das-ask/ask/server"
)

// attack makes every call on alice's conversation and ticket with token, and asserts each is
// the 404 a made-up id of the same shape gets, byte for byte.
func attack(ctx context.Context, t *testing.T, a *api, token, cid, ticket string) {
	t.Helper()
	fakeTicket := "t_" + rand.Text()
	fakeConv := "c_" + rand.Text()
	same := func(what string, got, want response) {
		t.Helper()
		problem(t, got, http.StatusNotFound)
		if !bytes.Equal(got.body, want.body) || got.header.Get("Content-Type") != want.header.Get("Content-Type") {
			t.Errorf("%s: not-yours answers %s, a made-up id %s", what, got.body, want.body)
		}
	}
	q := []byte(`{"question":"` + qSev1 + `"}`)
	same("ask in the conversation",
		a.do(ctx, t, http.MethodPost, "/v1/conversations/"+cid+"/asks", token, q, nil),
		a.do(ctx, t, http.MethodPost, "/v1/conversations/"+fakeConv+"/asks", token, q, nil))
	for _, c := range []struct {
		method, suffix string
		hdr            map[string]string
	}{
		{http.MethodGet, "", nil},
		{http.MethodGet, "", map[string]string{"Prefer": "wait=1"}},
		{http.MethodGet, "/events", nil},
		{http.MethodGet, "/events", map[string]string{"Last-Event-ID": "1"}},
		{http.MethodGet, "/events?after=0", nil},
		{http.MethodPost, "/cancel", nil},
	} {
		same(c.method+" "+c.suffix,
			a.do(ctx, t, c.method, "/v1/asks/"+ticket+c.suffix, token, nil, c.hdr),
			a.do(ctx, t, c.method, "/v1/asks/"+fakeTicket+c.suffix, token, nil, c.hdr))
	}
}

// A second identity of the same tenant gets, on every call against alice's conversation and
// running ticket, exactly the 404 that a made-up id gets — and its cancel does not cancel her
// run. Guessed ids (alice's own ticket id altered, sequential-looking ids) are 404 too, or 400
// when they are not even of the ticket's shape.
func TestAnotherIdentityGetsTheSame404(t *testing.T) {
	s, _ := startStack(t, stack.Options{})
	a := newAPI(s.AskURL)
	defer a.close()
	ctx := t.Context()
	alice := mint(t, s.IdP, idp.Claims{OID: "alice"})
	bob := mint(t, s.IdP, idp.Claims{OID: "bob"})
	aliceAgain := mint(t, s.IdP, idp.Claims{OID: "alice", Alg: idp.ES256})

	cid := a.conversation(ctx, t, alice)
	ticket := a.ask(ctx, t, alice, cid, qSlowSev1) // its first model turn waits: still running below
	attack(ctx, t, a, bob, cid, ticket)

	made := a.do(ctx, t, http.MethodGet, "/v1/asks/t_"+rand.Text(), bob, nil, nil)
	last := ticket[len(ticket)-1]
	flipped := byte('A')
	if last == 'A' {
		flipped = 'B'
	}
	for _, guess := range []string{
		ticket[:len(ticket)-1] + string(flipped), strings.ToLower(ticket), "t_" + strings.Repeat("A", 26),
		"t_1", "t_0", "1", "t_" + ticket[2:len(ticket)-1], cid, "c_" + cid[2:], "..%2f" + ticket, "t_%00",
	} {
		r := a.do(ctx, t, http.MethodGet, "/v1/asks/"+guess, bob, nil, nil)
		if r.status == http.StatusBadRequest {
			continue // not of a ticket's shape: refused before any lookup
		}
		if r.status != http.StatusNotFound || !bytes.Equal(r.body, made.body) {
			t.Errorf("guess %q: %d %s, want the 404 of a made-up id", guess, r.status, r.body)
		}
	}

	st := a.finish(ctx, t, aliceAgain, ticket, 60*time.Second) // the same oid with another token owns it
	if st.State != gen.AskStateAnswer {
		t.Fatalf("alice's run ended %s after bob's attempts, want answer", st.State)
	}
	attack(ctx, t, a, bob, cid, ticket) // finished: still nothing to see
}

// Ticket and conversation ids carry at least 128 bits of randomness: 26 symbols of the base32
// alphabet after the prefix, all distinct, and every position takes (nearly) every symbol over
// a few hundred ids — which no counter, timestamp or short random suffix would.
func TestIDsAreUnguessable(t *testing.T) {
	const n = 300
	cfg := server.DefaultConfig()
	cfg.MaxConversationsPerID = n // one identity makes them all; its cap is not what this test is about
	s, _ := startStack(t, stack.Options{Service: &cfg})
	a := newAPI(s.AskURL)
	defer a.close()
	ctx := t.Context()
	tok := mint(t, s.IdP, idp.Claims{OID: "alice"})

	var convs []string
	for range n {
		convs = append(convs, a.conversation(ctx, t, tok))
	}
	tickets := []string{a.ask(ctx, t, tok, convs[0], qCFR), a.ask(ctx, t, tok, convs[1], qCFR)}
	check := func(prefix string, ids []string, positional bool) {
		t.Helper()
		seen := map[string]bool{}
		var symbols []map[byte]bool
		for _, id := range ids {
			body, ok := strings.CutPrefix(id, prefix)
			if !ok || len(body) < 26 {
				t.Fatalf("id %q: want %q and at least 26 base32 symbols (128 bits)", id, prefix)
			}
			for i := 0; i < len(body); i++ {
				if c := body[i]; !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
					t.Fatalf("id %q: symbol %q is outside the base32 alphabet, so fewer bits per symbol", id, c)
				}
				for len(symbols) <= i {
					symbols = append(symbols, map[byte]bool{})
				}
				symbols[i][body[i]] = true
			}
			if seen[id] {
				t.Fatalf("id %q issued twice", id)
			}
			seen[id] = true
		}
		if !positional {
			return
		}
		for i, set := range symbols[:26] {
			// 300 uniform draws from 32 symbols miss one with probability ~ 32·(31/32)^300 ≈ 2e-3;
			// allow a few.
			if len(set) < 28 {
				t.Errorf("%s position %d took only %d distinct symbols over %d ids: not uniformly random", prefix, i, len(set), len(ids))
			}
		}
	}
	check("c_", convs, true)
	check("t_", tickets, false)
	for _, tk := range tickets {
		a.finish(ctx, t, tok, tk, 60*time.Second)
	}
}

// multiTenant accepts bearers of either issuer: two tenants served by one service. It picks
// the validator by the token's (unverified) issuer, which that validator then checks: trying
// each validator in turn would send every other tenant's kid to the wrong JWKS as unknown and
// spend its refetch budget.
type multiTenant map[string]*auth.Validator

func (m multiTenant) Authenticate(ctx context.Context, tok string) (ask.Identity, error) {
	var c jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(tok, &c); err != nil {
		return ask.Identity{}, errors.New("token is malformed")
	}
	v, ok := m[c.Issuer]
	if !ok {
		return ask.Identity{}, errors.New("issuer is not accepted")
	}
	return v.Authenticate(ctx, tok)
}

// Ownership never crosses tenants: the same oid ("alice") from another issuer is someone else,
// and gets the same 404 as a made-up id on every call.
func TestAnotherTenantGetsTheSame404(t *testing.T) {
	ctx := t.Context()
	p1, p2 := newSwitchableIdP(t), newSwitchableIdP(t)
	vs := multiTenant{}
	for _, p := range []*switchableIdP{p1, p2} {
		v, err := auth.New(ctx, auth.Config{JWKSURL: p.JWKSURL(), Issuer: p.Issuer(), Audience: "das", RequiredScope: "das"}, auth.Options{})
		if err != nil || !v.Ready() {
			t.Fatalf("validator: %v", err)
		}
		vs[p.Issuer()] = v
	}
	runner := &gatedRunner{gate: make(chan struct{})}
	a := serveService(t, vs, runner)
	alice1 := mint(t, p1.IdP, idp.Claims{OID: "alice"})
	alice2 := mint(t, p2.IdP, idp.Claims{OID: "alice"})

	cid := a.conversation(ctx, t, alice1)
	ticket := a.ask(ctx, t, alice1, cid, "q")
	attack(ctx, t, a, alice2, cid, ticket)
	close(runner.gate)
	if st := a.finish(ctx, t, alice1, ticket, 20*time.Second); st.State != gen.AskStateAnswer {
		t.Fatalf("tenant 1's run ended %s after tenant 2's attempts", st.State)
	}
	attack(ctx, t, a, alice2, cid, ticket)
}

// An issuer that serves several tenants names each in a `tid` claim (Microsoft Entra ID, whose
// docs say to key a user by tid and oid together, an oid being unique only within its tenant):
// the same oid under another tid, or under none, is someone else, as under another issuer, and
// gets the same 404 as a made-up id on every call. Until 2026-12-05 the tid was ignored and
// "alice" of tenant t2 read, followed, cancelled and asked in the work of "alice" of t1.
func TestAnotherTIDOfTheSameIssuerGetsTheSame404(t *testing.T) {
	ctx := t.Context()
	p := newSwitchableIdP(t)
	v, err := auth.New(ctx, auth.Config{JWKSURL: p.JWKSURL(), Issuer: p.Issuer(), Audience: "das", RequiredScope: "das"}, auth.Options{})
	if err != nil || !v.Ready() {
		t.Fatalf("validator: %v", err)
	}
	runner := &gatedRunner{gate: make(chan struct{})}
	a := serveService(t, v, runner)
	tid := func(tid any) string {
		return mint(t, p.IdP, idp.Claims{OID: "alice", Extra: map[string]any{"tid": tid}})
	}
	alice1 := tid("t1")

	cid := a.conversation(ctx, t, alice1)
	ticket := a.ask(ctx, t, alice1, cid, "q")
	others := map[string]string{"another tid": tid("t2"), "no tid": tid(nil), "a tid that differs in case": tid("T1")}
	for name, other := range others {
		t.Run(name, func(t *testing.T) { attack(ctx, t, a, other, cid, ticket) })
	}
	close(runner.gate)
	if st := a.finish(ctx, t, tid("t1"), ticket, 20*time.Second); st.State != gen.AskStateAnswer {
		t.Fatalf("tenant t1's run ended %s after the others' attempts (a second token of t1 reads it)", st.State)
	}
	for name, other := range others {
		t.Run(name+" after the end", func(t *testing.T) { attack(ctx, t, a, other, cid, ticket) })
	}
}

// The contract says who owns what as TestAnotherTIDOfTheSameIssuerGetsTheSame404 finds it: where
// it names the identity (the document's description, the bearer scheme's), it names the tenant's
// `tid` beside the `oid`. When the tid became part of the tenant (7f08afb), README.md and
// SECURITY.md said so and the contract went on saying "the `oid` claim is the identity", which
// promised a client of a multi-tenant issuer that its tenants' users shared their work.
func TestTheContractNamesTheTenant(t *testing.T) {
	doc, err := openapi.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for where, text := range map[string]string{
		"info.description":         doc.Info.Description,
		"bearerAuth's description": doc.Components.SecuritySchemes["bearerAuth"].Value.Description,
	} {
		for _, claim := range []string{"`oid`", "`tid`", "issuer"} {
			if !strings.Contains(text, claim) {
				t.Errorf("the contract's %s does not name %s as part of the identity", where, claim)
			}
		}
	}
}
