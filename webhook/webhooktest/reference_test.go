package webhooktest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/webhook/webhooktest"
)

// The reference libraries' own test vector (libraries/python/tests/test_webhooks.py,
// test_sign_function; the same in the JavaScript and Go tests).
const (
	vecSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecTS     = "1614265330"
	vecBody   = `{"test": 2432232314}`
	vecSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestReferenceVerify(t *testing.T) {
	at := time.Unix(1614265330, 0).Add(90 * time.Second)
	other := "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="
	for _, tc := range []struct {
		name                      string
		secret, id, ts, sig, body string
		now                       time.Time
		ok                        bool
	}{
		{"the vector", vecSecret, vecID, vecTS, vecSig, vecBody, at, true},
		{"without the whsec_ prefix", strings.TrimPrefix(vecSecret, "whsec_"), vecID, vecTS, vecSig, vecBody, at, true},
		{"among other signatures (rotation)", vecSecret, vecID, vecTS, other + " v1a,abc " + vecSig, vecBody, at, true},
		{"another secret", "whsec_" + strings.Repeat("A", 32), vecID, vecTS, vecSig, vecBody, at, false},
		{"a changed body", vecSecret, vecID, vecTS, vecSig, vecBody + " ", at, false},
		{"a changed id", vecSecret, vecID + "x", vecTS, vecSig, vecBody, at, false},
		{"a changed timestamp", vecSecret, vecID, "1614265331", vecSig, vecBody, at, false},
		{"only another version", vecSecret, vecID, vecTS, strings.Replace(vecSig, "v1,", "v2,", 1), vecBody, at, false},
		{"an entry without a comma", vecSecret, vecID, vecTS, "v1 " + vecSig, vecBody, at, false},
		{"unpadded signature text", vecSecret, vecID, vecTS, strings.TrimSuffix(vecSig, "="), vecBody, at, false},
		{"too old", vecSecret, vecID, vecTS, vecSig, vecBody, at.Add(5 * time.Minute), false},
		{"too new", vecSecret, vecID, vecTS, vecSig, vecBody, time.Unix(1614265330, 0).Add(-6 * time.Minute), false},
		{"no id", vecSecret, "", vecTS, vecSig, vecBody, at, false},
		{"not UTF-8", vecSecret, vecID, vecTS, vecSig, "\xff", at, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := webhooktest.ReferenceVerify(tc.secret, tc.id, tc.ts, tc.sig, []byte(tc.body), tc.now)
			if (err == nil) != tc.ok {
				t.Fatalf("ReferenceVerify = %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// TestReceiverRefusesAnEmptySecret: a receiver given no key (an unset setting split on commas)
// does not start, rather than verify with an empty HMAC key anyone can sign with.
func TestReceiverRefusesAnEmptySecret(t *testing.T) {
	for _, s := range []string{"", "whsec_", "whsec_!!"} {
		if r, err := webhooktest.New(webhooktest.Secret(), s); err == nil {
			r.Close()
			t.Errorf("New(…, %q) started a receiver; want it refused", s)
		}
	}
}
