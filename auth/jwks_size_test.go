package auth_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/demo/idp"
)

// countingBody is a response body that counts what its reader took from it.
type countingBody struct {
	io.Reader
	read *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	b.read.Add(int64(n))
	return n, err
}

func (countingBody) Close() error { return nil }

// repeat is an endless run of one byte.
type repeat byte

func (c repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c)
	}
	return len(p), nil
}

// A JWKS response is read up to a bound (1 MiB), not for as long as the IdP (or whatever
// answers at DAS_JWKS_URL) keeps sending: jwkset decodes the whole body into memory, so a
// huge or endless JWKS took memory without limit until the fetch timed out. Here the IdP's
// real keys follow 16 MiB of padding in one member: the fetch must stop reading near the
// bound and fail (no keys loaded, the token refused), not read it all and accept the key.
func TestHugeJWKSIsNotReadWhole(t *testing.T) {
	const issuer = "http://idp.test"
	p, err := idp.New(idp.Options{Issuer: issuer})
	if err != nil {
		t.Fatal(err)
	}
	set, err := p.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rest, ok := bytes.CutPrefix(bytes.TrimSpace(set), []byte("{"))
	if !ok {
		t.Fatalf("JWKS is not an object: %.40s", set)
	}
	const padding = 16 << 20
	var read atomic.Int64
	tr := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		body := io.MultiReader(strings.NewReader(`{"padding":"`), io.LimitReader(repeat('a'), padding),
			strings.NewReader(`",`), bytes.NewReader(rest))
		return &http.Response{
			StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
			ContentLength: -1, Body: countingBody{body, &read}, Request: r,
		}, nil
	})
	v, err := auth.New(t.Context(), auth.Config{JWKSURL: p.JWKSURL(), Issuer: issuer, Audience: "das", RequiredScope: "das"},
		auth.Options{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	if got := read.Load(); got > 1<<20+64<<10 {
		t.Errorf("the first JWKS fetch read %d bytes of a %d-byte response, want at most about 1 MiB", got, padding)
	}
	if v.Ready() {
		t.Error("Ready after a JWKS response over the bound, want not ready")
	}
	tok, err := p.Mint(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Authenticate(t.Context(), tok); err == nil {
		t.Error("a token signed by a key published past the bound was accepted")
	}
}

// A 200 response that is not a JWK Set (RFC 7517 §5: an object whose "keys" member, which is
// required, is an array) is a failed fetch, as HTML is: the keys already held are kept. jwkset
// read `{}`, `null` and `{"keys":null}` as an empty set and dropped every key, refusing every
// caller until a later fetch. `{"keys":[]}` is a set, an empty one: the issuer withdrew its
// keys, and no token is accepted.
func TestNotAJWKSetKeepsTheKeys(t *testing.T) {
	const issuer = "http://idp.test"
	p, err := idp.New(idp.Options{Issuer: issuer})
	if err != nil {
		t.Fatal(err)
	}
	good, err := p.JWKS(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := p.Mint(idp.Claims{OID: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		body   string
		accept bool
	}{
		{`{}`, true}, {`null`, true}, {`{"keys":null}`, true}, {`{"keys":{}}`, true}, {`[]`, true},
		{`<html>`, true}, {`{"keys":[]}`, false},
	} {
		t.Run(tt.body, func(t *testing.T) {
			var body atomic.Value
			body.Store([]byte(good))
			tr := &handlerTransport{h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(body.Load().([]byte))
			})}
			v, err := auth.New(t.Context(), auth.Config{JWKSURL: p.JWKSURL(), Issuer: issuer, Audience: "das", RequiredScope: "das"},
				auth.Options{HTTPClient: &http.Client{Transport: tr}})
			if err != nil {
				t.Fatal(err)
			}
			body.Store([]byte(tt.body))
			// A kid the set lacks makes the validator fetch the JWKS again, now tt.body.
			if _, err := v.Authenticate(t.Context(), garbageKID(t, issuer, 0)); err == nil {
				t.Fatal("a garbage kid was accepted")
			}
			if got := tr.fetches.Load(); got != 2 {
				t.Fatalf("%d JWKS fetches, want 2 (New's and the unknown kid's)", got)
			}
			_, err = v.Authenticate(t.Context(), tok)
			if tt.accept && err != nil {
				t.Errorf("after a fetch answered %s, a token of a held key is refused: %v", tt.body, err)
			}
			if !tt.accept && err == nil {
				t.Errorf("after a fetch answered %s, a token of a withdrawn key is accepted", tt.body)
			}
		})
	}
}
