package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// The CLI reads a token's oid and tid as the service does: by their exact names (RFC 7519 §4),
// so its --as guard and its state file's key name the identity the service will own by. It
// read them in any case ("OID", "Tid"), which the service refuses.
func TestClaimsAreReadByTheirExactNames(t *testing.T) {
	jwt := func(payload string) string {
		return "e30." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".c2ln"
	}
	for _, c := range []struct{ payload, oid, tid string }{
		{`{"oid":"alice","tid":"T1"}`, "alice", "T1"},
		{`{"OID":"mallory","Tid":"T2"}`, "", ""},
		{`{"oid":"alice","TID":"T2"}`, "alice", ""},
		{`{"OID":"mallory","oid":"alice"}`, "alice", ""},
		{`{"oid":7}`, "", ""},
	} {
		oid, tid := claimsOf(jwt(c.payload))
		if oid != c.oid || tid != c.tid {
			t.Errorf("%s: oid %q tid %q, want %q %q", c.payload, oid, tid, c.oid, c.tid)
		}
	}
}

// A dev token is handed out again only while it will outlast a run: the run forwards the token
// it was asked with to every source until it ends, and a token reused with 30 s left (the old
// margin, under the service's default 120 s deadline) failed the run half-way with the source's
// 401. A token of an hour is minted again with five minutes left; a short one at half its life.
func TestDevTokenIsReusedOnlyWhileItOutlastsARun(t *testing.T) {
	for _, c := range []struct {
		name      string
		expiresIn int
		reused    time.Duration // still reused this long after minting
		fresh     time.Duration // minted again this long after
	}{
		{"an hour", 3600, 54 * time.Minute, 55*time.Minute + time.Second},
		{"two minutes", 120, 59 * time.Second, 61 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				minted := 0
				src := &idpSource{url: "http://idp.invalid", oid: "alice", http: &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
					minted++
					body := fmt.Sprintf(`{"access_token":"t%d","token_type":"Bearer","expires_in":%d}`, minted, c.expiresIn)
					return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(body)), Header: http.Header{}}, nil
				})}}
				token := func() string {
					tok, err := src.Token(t.Context())
					if err != nil {
						t.Fatal(err)
					}
					return tok
				}
				if got := token(); got != "t1" {
					t.Fatalf("first token %q", got)
				}
				time.Sleep(c.reused)
				if got := token(); got != "t1" {
					t.Errorf("after %v: %q, want the first token reused", c.reused, got)
				}
				time.Sleep(c.fresh - c.reused)
				if got := token(); got != "t2" {
					t.Errorf("after %v: %q, want a fresh token", c.fresh, got)
				}
			})
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
