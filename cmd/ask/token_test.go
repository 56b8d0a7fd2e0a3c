package main

import (
	"encoding/base64"
	"testing"
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
