// Package seal keeps the question text unreadable at rest: a shared store that persists (Redis
// with AOF or RDB, the durable mode) seals the accepted event and the conversation turns with
// an operator's key before they reach the store, and opens them on the way back, so no file on
// disk holds a question readable. Dropping a key crypto-shreds everything sealed with it: it
// can no longer be opened, by anyone.
//
// The AEAD is XChaCha20-Poly1305 (golang.org/x/crypto): 256-bit keys and 192-bit random
// nonces, so a key seals any number of messages without a nonce ever repeating by chance.
// Each sealed value is bound to where it belongs (the associated data: which ticket's accepted
// event, which conversation's turn), so one cannot be moved to another place and opened there.
//
// Keys carry ids, for rotation: the first key seals, every key opens. To rotate, put a new key
// first and keep the old one until everything it sealed has expired (the TTL); then drop it.
package seal

import (
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"
)

// Prefix starts every sealed value: "sealed:v1:<kid>:<base64url(nonce || ciphertext)>".
const Prefix = "sealed:v1:"

// Errors Open returns.
var (
	// ErrUnknownKey: the value was sealed with a key this Keys does not hold (dropped: the
	// value is crypto-shredded).
	ErrUnknownKey = errors.New("seal: sealed with a key that is not configured")
	// ErrNotSealed: the value is not sealed (or not in the sealed format).
	ErrNotSealed = errors.New("seal: not a sealed value")
	// ErrCorrupt: the value does not open with its key (altered, or moved from another place).
	ErrCorrupt = errors.New("seal: the sealed value does not open")
)

// Keys seals with its first key and opens with any. A Keys is safe for concurrent use.
type Keys struct {
	ids   []string
	aeads map[string]cipher.AEAD
	tags  map[string][]byte // each key's tag key (Tags), derived from it
}

// ParseKeys reads "kid1:base64key,kid2:base64key": ids of letters, digits, '-' or '_' (at most
// 32), keys of 32 bytes in standard or URL base64, padded or not. Errors never echo a key.
func ParseKeys(s string) (*Keys, error) {
	k := &Keys{aeads: map[string]cipher.AEAD{}, tags: map[string][]byte{}}
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		kid, b64, ok := strings.Cut(part, ":")
		if !ok || !validID(kid) {
			return nil, fmt.Errorf("seal: key %d: want kid:base64key with a kid of letters, digits, - or _ (1 to 32)", i+1)
		}
		if _, dup := k.aeads[kid]; dup {
			return nil, fmt.Errorf("seal: key id %q is given twice", kid)
		}
		key, err := decodeKey(b64)
		if err != nil || len(key) != chacha20poly1305.KeySize {
			return nil, fmt.Errorf("seal: key %q: want %d bytes in base64", kid, chacha20poly1305.KeySize)
		}
		aead, err := chacha20poly1305.NewX(key)
		if err != nil {
			return nil, fmt.Errorf("seal: key %q: %w", kid, err)
		}
		k.ids = append(k.ids, kid)
		k.aeads[kid] = aead
		k.tags[kid] = derive(key, "ask/seal/tag/v1")
	}
	return k, nil
}

// NewKey returns a fresh key in the form ParseKeys reads, for kid.
func NewKey(kid string) string {
	key := make([]byte, chacha20poly1305.KeySize)
	_, _ = rand.Read(key)
	return kid + ":" + base64.StdEncoding.EncodeToString(key)
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("seal: not base64")
}

func validID(kid string) bool {
	if kid == "" || len(kid) > 32 {
		return false
	}
	for _, r := range kid {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// SealingKey is the id of the key that seals.
func (k *Keys) SealingKey() string { return k.ids[0] }

// Seal seals plaintext for the place ad names, with the first key.
func (k *Keys) Seal(plaintext, ad []byte) []byte {
	kid := k.ids[0]
	aead := k.aeads[kid]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	_, _ = rand.Read(nonce)
	sealed := aead.Seal(nonce, nonce, plaintext, ad)
	out := make([]byte, 0, len(Prefix)+len(kid)+1+base64.RawURLEncoding.EncodedLen(len(sealed)))
	out = append(out, Prefix...)
	out = append(out, kid...)
	out = append(out, ':')
	return base64.RawURLEncoding.AppendEncode(out, sealed)
}

// Open opens what Seal sealed for the same ad, with whichever configured key sealed it.
func (k *Keys) Open(sealed, ad []byte) ([]byte, error) {
	rest, ok := strings.CutPrefix(string(sealed), Prefix)
	if !ok {
		return nil, ErrNotSealed
	}
	kid, b64, ok := strings.Cut(rest, ":")
	if !ok {
		return nil, ErrNotSealed
	}
	aead, ok := k.aeads[kid]
	if !ok {
		return nil, ErrUnknownKey
	}
	raw, err := base64.RawURLEncoding.DecodeString(b64)
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return nil, ErrCorrupt
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], ad)
	if err != nil {
		return nil, ErrCorrupt
	}
	return plain, nil
}

// Tags are keyed digests of msg for the place ad names, one per configured key, the sealing
// key's first. The same msg and ad always give the same tags, so a value can be recognised
// again without being kept (an Idempotency-Key's request, whose body holds the question); and
// unlike a plain hash, a tag at rest does not let anyone without the key test a guess of msg.
// The other keys' tags recognise a value tagged before a rotation.
func (k *Keys) Tags(msg, ad []byte) []string {
	out := make([]string, 0, len(k.ids))
	for _, kid := range k.ids {
		m := hmac.New(sha256.New, k.tags[kid])
		m.Write(binary.BigEndian.AppendUint32(nil, uint32(len(ad))))
		m.Write(ad)
		m.Write(msg)
		out = append(out, tagPrefix+kid+":"+base64.RawURLEncoding.EncodeToString(m.Sum(nil)))
	}
	return out
}

// tagPrefix starts every tag: "tag:v1:<kid>:<base64url(HMAC-SHA256)>".
const tagPrefix = "tag:v1:"

// derive is a key for one use of key, so the AEAD key itself is never a MAC key.
func derive(key []byte, use string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(use))
	return m.Sum(nil)
}

// IsSealed reports whether b is in the sealed format.
func IsSealed(b []byte) bool { return strings.HasPrefix(string(b), Prefix) }
