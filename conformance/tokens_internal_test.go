package conformance

import (
	"encoding/base64"
	"testing"
	"time"
)

func TestPayloadClaims(t *testing.T) {
	jws := func(payload string) string {
		return "eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".sig"
	}
	for _, tc := range []struct {
		name    string
		token   string
		wantTID string
		wantExp int64 // 0: no exp
	}{
		{"both", jws(`{"tid":"t2","exp":1700000000}`), "t2", 1700000000},
		{"exp as a float", jws(`{"exp":1700000000.5}`), "", 1700000000},
		{"none", jws(`{}`), "", 0},
		{"negative exp", jws(`{"tid":"t2","exp":-1}`), "t2", 0},
		{"huge exp", jws(`{"exp":1e300}`), "", 0},
		{"exp a string", jws(`{"tid":"t2","exp":"soon"}`), "t2", 0},
		{"tid a number", jws(`{"tid":7,"exp":1700000000}`), "", 1700000000},
		{"not JSON", jws(`tid`), "", 0},
		{"two parts", "a." + base64.RawURLEncoding.EncodeToString([]byte(`{"tid":"t2"}`)), "", 0},
		{"bad base64", "a.!!!.c", "", 0},
		{"empty", "", "", 0},
	} {
		if got := payloadTID(tc.token); got != tc.wantTID {
			t.Errorf("%s: payloadTID = %q, want %q", tc.name, got, tc.wantTID)
		}
		exp, ok := payloadExp(tc.token)
		if want := tc.wantExp != 0; ok != want || (ok && !exp.Equal(time.Unix(tc.wantExp, 0))) {
			t.Errorf("%s: payloadExp = %v, %v; want %d, %v", tc.name, exp, ok, tc.wantExp, want)
		}
	}
}
