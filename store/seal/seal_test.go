package seal_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/das-ask/ask/store/seal"
)

func mustKeys(t *testing.T, s string) *seal.Keys {
	t.Helper()
	k, err := seal.ParseKeys(s)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	k1, k2 := seal.NewKey("k1"), seal.NewKey("k2")
	old := mustKeys(t, k1)
	question := []byte("How many sev1 incidents did we have in 2026-Q2?")
	ad := []byte("accepted\x00t_1")
	sealed := old.Seal(question, ad)
	if bytes.Contains(sealed, question) || bytes.Contains(sealed, []byte("sev1")) || !seal.IsSealed(sealed) {
		t.Fatalf("sealed value %q holds the question or is not marked sealed", sealed)
	}
	if again := old.Seal(question, ad); bytes.Equal(again, sealed) {
		t.Error("two seals of one value are equal: the nonce did not change")
	}
	got, err := old.Open(sealed, ad)
	if err != nil || !bytes.Equal(got, question) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := old.Open(sealed, []byte("accepted\x00t_2")); !errors.Is(err, seal.ErrCorrupt) {
		t.Errorf("opened for another place: %v, want ErrCorrupt", err)
	}
	tampered := append([]byte(nil), sealed...)
	tampered[len(tampered)-3] ^= 1
	if _, err := old.Open(tampered, ad); err == nil {
		t.Error("a tampered value opened")
	}
	if _, err := old.Open(question, ad); !errors.Is(err, seal.ErrNotSealed) {
		t.Errorf("Open of plaintext: %v, want ErrNotSealed", err)
	}

	// Rotation: a new key first seals; the old one still opens what it sealed.
	rotated := mustKeys(t, k2+","+k1)
	if rotated.SealingKey() != "k2" {
		t.Errorf("sealing key %q, want k2", rotated.SealingKey())
	}
	if got, err := rotated.Open(sealed, ad); err != nil || !bytes.Equal(got, question) {
		t.Errorf("the old key's value after rotation: %q, %v", got, err)
	}
	if !strings.HasPrefix(string(rotated.Seal(question, ad)), "sealed:v1:k2:") {
		t.Error("after rotation the new key does not seal")
	}
	// Dropping the old key shreds what it sealed.
	if _, err := mustKeys(t, k2).Open(sealed, ad); !errors.Is(err, seal.ErrUnknownKey) {
		t.Errorf("Open after the key was dropped: %v, want ErrUnknownKey", err)
	}
}

func TestParseKeysRefuses(t *testing.T) {
	good := seal.NewKey("a")
	_, key, _ := strings.Cut(good, ":")
	for _, bad := range []string{"", "nokid", ":" + key, "a b:" + key, "a:short", "a:" + key + ",a:" + key, strings.Repeat("k", 33) + ":" + key} {
		_, err := seal.ParseKeys(bad)
		if err == nil {
			t.Errorf("ParseKeys(%q) accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), key) {
			t.Errorf("the error for %q echoes the key: %v", bad, err)
		}
	}
	if _, err := seal.ParseKeys(" a:" + key + " , b:" + strings.TrimRight(key, "=") + " "); err != nil {
		t.Errorf("spaces and unpadded base64: %v", err)
	}
}
