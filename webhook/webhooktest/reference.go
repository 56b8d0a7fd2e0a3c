package webhooktest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ReferenceVerify verifies one delivery the way the Standard Webhooks reference receivers do,
// independently of the Go library the service signs with (and Verify's own check), so a fault
// that library shares between signing and verifying still shows. It is a line-by-line port of
// the Python library's Webhook (standard-webhooks/standard-webhooks,
// libraries/python/standardwebhooks/webhooks.py: __init__, verify, sign, __verify_timestamp),
// with the JavaScript library's stricter comparison (libraries/javascript/src/index.ts: the
// base64 signature text compared as written, so it must be the canonical, padded encoding):
//
//   - the secret: "whsec_" stripped, then base64-decoded with "==" appended (unpadded is fine);
//   - the body must be UTF-8 (Python decodes it; JavaScript's toString would alter it);
//   - webhook-id, webhook-timestamp and webhook-signature all present and non-empty;
//   - the timestamp a number within 5 minutes of now, signed as the floor of its seconds;
//   - signed content id + "." + timestamp + "." + body, HMAC-SHA256 under the key;
//   - the signature header split on " ", each entry split on "," into exactly two parts (Python
//     unpacks two), entries whose version is not "v1" skipped, one of the rest equal to the
//     expected signature.
//
// id, timestamp and signature are the three headers' values; now is the receiver's clock.
func ReferenceVerify(secret, id, timestamp, signature string, body []byte, now time.Time) error {
	// Webhook.__init__: strip the prefix, b64decode(whsecret + "==").
	raw := strings.TrimPrefix(secret, "whsec_")
	key, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(raw+"==", "="))
	if err != nil {
		return fmt.Errorf("secret: %w", err)
	}
	if len(key) == 0 {
		return errors.New("webhook secret may not be empty")
	}
	// verify: data.decode().
	if !utf8.Valid(body) {
		return errors.New("body is not UTF-8")
	}
	if id == "" || timestamp == "" || signature == "" {
		return errors.New("missing required headers")
	}
	// __verify_timestamp: float(header), 5 minutes either way.
	f, err := strconv.ParseFloat(timestamp, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return errors.New("invalid signature headers")
	}
	tolerance := (5 * time.Minute).Seconds()
	nowS := float64(now.UnixNano()) / 1e9
	if f < nowS-tolerance {
		return errors.New("message timestamp too old")
	}
	if f > nowS+tolerance {
		return errors.New("message timestamp too new")
	}
	// sign: str(floor(timestamp)), f"{msg_id}.{timestamp_str}.{data}".
	signed := id + "." + strconv.FormatFloat(math.Floor(f), 'f', 0, 64) + "." + string(body)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(signed))
	expected := mac.Sum(nil)
	expectedText := base64.StdEncoding.EncodeToString(expected)
	for _, versioned := range strings.Split(signature, " ") {
		parts := strings.Split(versioned, ",")
		if len(parts) != 2 {
			// Python's (version, signature) = versioned_sig.split(",") raises here: the whole
			// verification fails, not just this entry.
			return fmt.Errorf("signature entry %q is not version,signature", versioned)
		}
		if parts[0] != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(parts[1])
		if err != nil {
			return fmt.Errorf("signature entry is not base64: %w", err)
		}
		if hmac.Equal(got, expected) {
			if parts[1] != expectedText { // JavaScript compares the text
				return errors.New("signature is not canonical base64 (the JavaScript library compares the text)")
			}
			return nil
		}
	}
	return errors.New("no matching signature found")
}
