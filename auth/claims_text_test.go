package auth_test

import (
	"encoding/base64"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/das-ask/ask/auth"
)

// signPayload returns a token whose claims are payload, byte for byte, signed by the published
// key: jwt.MapClaims would go through json.Marshal, which writes no invalid UTF-8 and no
// unpaired surrogate.
func (li *localIssuer) signPayload(t *testing.T, payload []byte) string {
	t.Helper()
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"ES256","typ":"JWT","kid":"`+li.kid+`"}`)) + "." + enc.EncodeToString(payload)
	sig, err := jwt.SigningMethodES256.Sign(signing, li.key)
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + enc.EncodeToString(sig)
}

// TestClaimsThatAreNotUTF8TextAreRefused: encoding/json reads invalid UTF-8 and an escaped
// unpaired surrogate as U+FFFD, so tokens whose oids were "v\xff", "v\xfe", "v\ud800" and
// "v\udc01" were all the identity "v\uFFFD", each reading what the others made. RFC 7519 §7.2
// has the claims be UTF-8; a surrogate pair is a character and stays accepted.
func TestClaimsThatAreNotUTF8TextAreRefused(t *testing.T) {
	li := newLocalIssuer(t)
	claims := func(oid string) []byte {
		now := time.Now()
		return []byte(`{"iss":"` + localIssuerURL + `","aud":"das","scope":"das","oid":"` + oid +
			`","iat":` + strconv.FormatInt(now.Unix(), 10) + `,"exp":` + strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + `}`)
	}
	tests := []struct {
		name, oid string
		want      string // the identity accepted; "" = refused as malformed
	}{
		{name: "plain (the control)", oid: `v`, want: "v"},
		{name: "a surrogate pair", oid: `v\ud83d\ude00`, want: "v\U0001F600"},
		{name: "invalid UTF-8 (ff)", oid: "v\xff"},
		{name: "invalid UTF-8 (fe)", oid: "v\xfe"},
		{name: "a lone high surrogate", oid: `v\ud800`},
		{name: "a lone low surrogate", oid: `v\udc01`},
		{name: "a high surrogate before a non-surrogate", oid: `v\ud800\u0041`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := li.v.Authenticate(t.Context(), li.signPayload(t, claims(tt.oid)))
			if tt.want != "" {
				if err != nil || id.OID != tt.want {
					t.Fatalf("Authenticate = %q, %v; want %q", id.OID, err, tt.want)
				}
				return
			}
			var e *auth.Error
			if !errors.As(err, &e) || e.Code != auth.CodeInvalidToken || e.Description != "token is malformed" {
				t.Fatalf("Authenticate = %q, %v; want invalid_token \"token is malformed\"", id.OID, err)
			}
		})
	}
}

// A claim named twice is read as its last (RFC 7519 §4), null included: a tid whose last is
// empty is refused, one whose last is null is no tid at all, whatever came before it; an oid
// whose last is null is no oid (it was the earlier one's identity).
func TestClaimNamedTwiceIsItsLast(t *testing.T) {
	li := newLocalIssuer(t)
	now := time.Now()
	claims := func(tids string) []byte {
		return []byte(`{"iss":"` + localIssuerURL + `","aud":"das","scope":"das","oid":"alice",` + tids +
			`,"iat":` + strconv.FormatInt(now.Unix(), 10) + `,"exp":` + strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + `}`)
	}
	if id, err := li.v.Authenticate(t.Context(), li.signPayload(t, claims(`"oid":null`))); err == nil {
		t.Errorf(`"oid":"alice","oid":null: accepted as %q, want refused (no oid)`, id.OID)
	}
	tenantless, err := li.v.Authenticate(t.Context(), li.signPayload(t, claims(`"x":1`)))
	if err != nil {
		t.Fatal(err)
	}
	acme, err := li.v.Authenticate(t.Context(), li.signPayload(t, claims(`"tid":"acme"`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tids, want string // want: the tenant of the identity accepted, or "" for refused
	}{
		{`"tid":"","tid":null`, tenantless.Tenant},
		{`"tid":"acme","tid":null`, tenantless.Tenant},
		{`"tid":null,"tid":""`, ""},
		{`"tid":"other","tid":"acme"`, acme.Tenant},
	} {
		id, err := li.v.Authenticate(t.Context(), li.signPayload(t, claims(tc.tids)))
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s: accepted as tenant %q, want refused", tc.tids, id.Tenant)
		case tc.want != "" && (err != nil || id.Tenant != tc.want):
			t.Errorf("%s: tenant %q, %v; want %q", tc.tids, id.Tenant, err, tc.want)
		}
	}
}
