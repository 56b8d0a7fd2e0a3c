package auth_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
)

// handlerTransport serves requests in memory from h and counts JWKS fetches, so a validator can
// run inside a synctest bubble (a real socket is not durably blocking).
type handlerTransport struct {
	h       http.Handler
	fetches atomic.Int64
	down    atomic.Bool
}

func (tr *handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tr.down.Load() {
		return nil, errors.New("connection refused")
	}
	if r.URL.Path == "/.well-known/jwks.json" {
		tr.fetches.Add(1)
	}
	w := httptest.NewRecorder()
	tr.h.ServeHTTP(w, r)
	return w.Result(), nil
}

// garbageKID returns a token that names a kid the IdP never published.
func garbageKID(t *testing.T, issuer string, n int) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"iss": issuer, "aud": "das", "scope": "das", "oid": "mallory", "exp": time.Now().Add(time.Hour).Unix(),
	})
	tok.Header["kid"] = "garbage-" + string(rune('a'+n%26)) + time.Now().Format("150405.000000000")
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func inMemoryValidator(t *testing.T, ctx context.Context) (*idp.IdP, *handlerTransport, *auth.Validator) {
	t.Helper()
	const issuer = "http://idp.test"
	p, err := idp.New(idp.Options{Issuer: issuer})
	if err != nil {
		t.Fatal(err)
	}
	tr := &handlerTransport{h: p.Handler()}
	cfg := auth.Config{JWKSURL: p.JWKSURL(), Issuer: issuer, Audience: "das", RequiredScope: "das"}
	v, err := auth.New(ctx, cfg, auth.Options{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	return p, tr, v
}

// A garbage kid, or a flood of them, must not lock a genuine key rotation out, and must not
// hold anyone waiting: the new kid is fetched at once after a few garbage kids; during a flood
// every unknown kid is refused at once (no request waits for the refetch limiter), the flood
// costs the IdP a bounded number of JWKS fetches, and a new key is accepted after the next
// refetch (within one interval).
func TestUnknownKIDRefreshAllowsRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		p, tr, v := inMemoryValidator(t, ctx)
		if !v.Ready() || tr.fetches.Load() != 1 {
			t.Fatalf("after New: ready=%v fetches=%d, want true, 1", v.Ready(), tr.fetches.Load())
		}
		mint := func(oid string) string {
			t.Helper()
			tok, err := p.Mint(idp.Claims{OID: oid})
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		if _, err := v.Authenticate(ctx, mint("alice")); err != nil {
			t.Fatal(err)
		}

		// One garbage kid (jwkset's default limiter would now block refetches for 5 minutes).
		if _, err := v.Authenticate(ctx, garbageKID(t, p.Issuer(), 0)); err == nil {
			t.Fatal("garbage kid accepted")
		}
		if err := p.Rotate(idp.RS256); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := v.Authenticate(ctx, mint("after-one-garbage")); err != nil {
			t.Fatalf("rotation after one garbage kid: %v", err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Fatalf("rotation after one garbage kid waited %s, want no wait", waited)
		}

		// A concurrent flood of garbage kids: every one refused, none kept waiting.
		before := tr.fetches.Load()
		floodStart := time.Now()
		var wg sync.WaitGroup
		var rejected atomic.Int64
		for i := range 50 {
			wg.Go(func() {
				_, err := v.Authenticate(ctx, garbageKID(t, p.Issuer(), i))
				var e *auth.Error
				if errors.As(err, &e) && e.Description == "signing key is unknown" {
					rejected.Add(1)
				}
			})
		}
		wg.Wait()
		if rejected.Load() != 50 {
			t.Fatalf("flood: %d of 50 garbage tokens rejected as an unknown key", rejected.Load())
		}
		// The burst left after the two refetches above: three.
		if got := tr.fetches.Load() - before; got > 3 {
			t.Fatalf("flood of 50 unknown kids caused %d JWKS fetches, want at most 3", got)
		}
		if took := time.Since(floodStart); took != 0 {
			t.Fatalf("flood kept requests waiting %s, want every refusal at once", took)
		}
		// A real token in the middle of the flood is not slowed by it.
		start = time.Now()
		if _, err := v.Authenticate(ctx, mint("during-flood")); err != nil || time.Since(start) != 0 {
			t.Fatalf("known key during the flood: %v after %s", err, time.Since(start))
		}

		// A rotation right after the flood: refused at once while no refetch is due, accepted
		// once one is (one interval at most), after exactly one more fetch.
		if err := p.Rotate(idp.RS256); err != nil {
			t.Fatal(err)
		}
		fresh := mint("after-flood")
		before = tr.fetches.Load()
		start = time.Now()
		if _, err := v.Authenticate(ctx, fresh); err == nil || time.Since(start) != 0 {
			t.Fatalf("new kid with no refetch due: err %v after %s, want an immediate refusal", err, time.Since(start))
		}
		time.Sleep(10 * time.Second)
		if _, err := v.Authenticate(ctx, fresh); err != nil {
			t.Fatalf("new kid one interval after the flood: %v", err)
		}
		if got := tr.fetches.Load() - before; got != 1 {
			t.Errorf("the rotation cost %d fetches, want 1", got)
		}
	})
}

// A service must start before its IdP: New succeeds with the JWKS unreachable, tokens are
// rejected with a clear reason, and once the IdP is up the next token validates.
func TestJWKSDownAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		const issuer = "http://idp.test"
		p, err := idp.New(idp.Options{Issuer: issuer})
		if err != nil {
			t.Fatal(err)
		}
		tr := &handlerTransport{h: p.Handler()}
		tr.down.Store(true)
		cfg := auth.Config{JWKSURL: p.JWKSURL(), Issuer: issuer, Audience: "das", RequiredScope: "das"}
		v, err := auth.New(ctx, cfg, auth.Options{HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatalf("New with the JWKS down: %v", err)
		}
		if v.Ready() {
			t.Fatal("Ready before any fetch succeeded")
		}
		tok, err := p.Mint(idp.Claims{OID: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Authenticate(ctx, tok)
		var e *auth.Error
		if !errors.As(err, &e) || e.Code != auth.CodeInvalidToken || e.Description != "no signing keys are known yet: the issuer's JWKS could not be fetched" {
			t.Fatalf("Authenticate with the JWKS down = %v", err)
		}
		if !errors.Is(err, auth.ErrKeysNotLoaded) {
			t.Errorf("Authenticate with the JWKS down = %v, not ErrKeysNotLoaded: the service would call a good token invalid", err)
		}

		tr.down.Store(false)
		if _, err := v.Authenticate(ctx, tok); err != nil {
			t.Fatalf("Authenticate once the IdP is up: %v", err)
		}
		if !v.Ready() {
			t.Fatal("not Ready after a successful fetch")
		}
		// Once keys are known, a key the set lacks is the token's fault, not the service's.
		forged, err := p.Forge(idp.Claims{OID: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Authenticate(ctx, forged); err == nil || errors.Is(err, auth.ErrKeysNotLoaded) {
			t.Errorf("Authenticate of a forged token once Ready = %v, want a refusal that is not ErrKeysNotLoaded", err)
		}
	})
}

// With no traffic at all, a validator that started before its IdP loads the keys within
// half a minute of the IdP coming up, not at the next periodic refresh: until then its
// readiness probe says jwks_not_loaded, and a load balancer that follows the probe sends it no
// request that could make it fetch. Meanwhile the IdP is asked with a backoff, not in a loop;
// once the keys are loaded, only the periodic refresh asks again.
func TestJWKSRetriedUntilLoaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		p, err := idp.New(idp.Options{Issuer: "http://idp.test"})
		if err != nil {
			t.Fatal(err)
		}
		tr := &handlerTransport{h: p.Handler()}
		tr.down.Store(true)
		var fetches atomic.Int64 // tried, whether the IdP answers or not
		counting := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			fetches.Add(1)
			return tr.RoundTrip(r)
		})}
		v, err := auth.New(ctx, auth.Config{JWKSURL: p.JWKSURL(), Issuer: p.Issuer(), Audience: "das"}, auth.Options{HTTPClient: counting})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if got := fetches.Load(); got < 10 || got > 40 {
			t.Errorf("IdP down for 10 min: %d fetches, want a backoff (between 10 and 40)", got)
		}
		if v.Ready() {
			t.Fatal("Ready with the IdP down")
		}
		tr.down.Store(false)
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if !v.Ready() {
			t.Fatal("not Ready 31 s after the IdP came up")
		}
		before := fetches.Load()
		time.Sleep(4 * time.Minute)
		synctest.Wait()
		if got := fetches.Load() - before; got != 0 {
			t.Errorf("%d fetches in the 4 min after the keys loaded, want none before the periodic refresh", got)
		}
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if got := fetches.Load() - before; got != 1 {
			t.Errorf("%d fetches by the periodic refresh, want 1", got)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The bearer never goes to the identity provider: the validator's JWKS fetches — the first,
// and the refetches an unknown kid causes — carry no token in a header, the URL or a body.
func TestJWKSFetchesCarryNoToken(t *testing.T) {
	p, err := idp.New(idp.Options{Issuer: "http://idp.test"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.URL.String()+"\n"+fmt.Sprint(r.Header)+"\n"+string(body))
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.Handler().ServeHTTP(w, r)
	}))
	defer hs.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cfg := auth.Config{JWKSURL: hs.URL + "/.well-known/jwks.json", Issuer: p.Issuer(), Audience: "das"}
	v, err := auth.New(ctx, cfg, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	good, err := p.Mint(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	forged := garbageKID(t, p.Issuer(), 1)
	if err := p.Rotate(idp.RS256); err != nil {
		t.Fatal(err)
	}
	rotated, err := p.Mint(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{good, forged, rotated} {
		v.Authenticate(ctx, tok)
	}
	if _, err := v.Authenticate(ctx, rotated); err != nil {
		t.Fatalf("rotated key: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 2 {
		t.Fatalf("%d JWKS requests: the refetch did not happen, so the check proves nothing", len(seen))
	}
	for _, tok := range []string{good, forged, rotated} {
		sig := tok[strings.LastIndexByte(tok, '.')+1:]
		for _, s := range seen {
			if strings.Contains(s, sig) {
				t.Errorf("a JWKS request carried a token: %.200s", s)
			}
		}
	}
}
