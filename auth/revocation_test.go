package auth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/das-ask/ask/auth"
)

// keyList is a JWKS whose keys a test replaces: what an IdP publishes across a rotation that
// retires its old key.
type keyList struct {
	mu   sync.Mutex
	keys map[string]*ecdsa.PrivateKey // kid → key
}

func (l *keyList) publish(t *testing.T, kids ...string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, kid := range kids {
		if l.keys[kid] == nil {
			k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			l.keys[kid] = k
		}
	}
	for kid := range l.keys {
		found := false
		for _, k := range kids {
			found = found || k == kid
		}
		if !found {
			l.keys[kid] = nil // retired: still known to the test, to sign with, but unpublished
		}
	}
}

func (l *keyList) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	set := jwkset.NewMemoryStorage()
	for kid, k := range l.keys {
		if k == nil {
			continue
		}
		jwk, err := jwkset.NewJWKFromKey(k.Public(), jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{ALG: jwkset.AlgES256, KID: kid, USE: jwkset.UseSig},
		})
		if err == nil {
			err = set.KeyWrite(r.Context(), jwk)
		}
		if err != nil {
			l.mu.Unlock()
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	l.mu.Unlock()
	raw, err := set.JSONPublic(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	_, _ = w.Write(raw)
}

// sign returns a token for oid signed by kid's key, published or retired.
func (l *keyList) sign(t *testing.T, issuer, kid string, retired map[string]*ecdsa.PrivateKey) string {
	t.Helper()
	l.mu.Lock()
	k := l.keys[kid]
	l.mu.Unlock()
	if k == nil {
		k = retired[kid]
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"iss": issuer, "aud": "das", "scope": "das", "oid": "alice", "exp": time.Now().Add(24 * time.Hour).Unix(),
	})
	tok.Header["kid"] = kid
	s, err := tok.SignedString(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A key the IdP stops publishing stops validating: at once after a refetch caused by a new
// kid, and after the periodic refresh (every 5 minutes) without any new kid. Between the
// retirement and the next fetch the cached key still validates, which is the documented cost
// of caching.
func TestRetiredKeyIsRefusedAfterTheNextFetch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		const issuer = "http://idp.test"
		l := &keyList{keys: map[string]*ecdsa.PrivateKey{}}
		l.publish(t, "a")
		tr := &handlerTransport{h: l}
		v, err := auth.New(ctx, auth.Config{JWKSURL: issuer + "/.well-known/jwks.json", Issuer: issuer, Audience: "das", RequiredScope: "das"},
			auth.Options{HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		// Keep the retired keys to sign with.
		keys := map[string]*ecdsa.PrivateKey{}
		remember := func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			for kid, k := range l.keys {
				if k != nil {
					keys[kid] = k
				}
			}
		}
		remember()
		tokA := l.sign(t, issuer, "a", keys)
		if _, err := v.Authenticate(ctx, tokA); err != nil {
			t.Fatalf("key a while published: %v", err)
		}

		// Rotation that retires a: a token of the new key b makes the validator refetch.
		l.publish(t, "b")
		remember()
		if _, err := v.Authenticate(ctx, l.sign(t, issuer, "b", keys)); err != nil {
			t.Fatalf("key b after the rotation: %v", err)
		}
		if _, err := v.Authenticate(ctx, tokA); err == nil {
			t.Fatal("key a, retired and refetched without it, still validates")
		}

		// Retirement without a new kid in sight: the periodic refresh drops b.
		tokB := l.sign(t, issuer, "b", keys)
		l.publish(t, "c")
		remember()
		time.Sleep(5*time.Minute + time.Second)
		synctest.Wait()
		if _, err := v.Authenticate(ctx, tokB); err == nil {
			t.Fatal("key b, retired 5 minutes ago, still validates")
		}
		if _, err := v.Authenticate(ctx, l.sign(t, issuer, "c", keys)); err != nil {
			t.Fatalf("key c: %v", err)
		}
		cancel()
		synctest.Wait()
	})
}
