package seal_test

import (
	"bytes"
	"errors"
	"slices"
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

func TestTags(t *testing.T) {
	k1, k2 := seal.NewKey("k1"), seal.NewKey("k2")
	one, err := seal.ParseKeys(k1)
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := seal.ParseKeys(k2 + "," + k1)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := seal.ParseKeys(seal.NewKey("k1"))
	msg, ad := []byte("how many sev1 incidents?"), []byte("place")
	a := one.Tags(msg, ad)
	if len(a) != 1 || !slices.Equal(one.Tags(msg, ad), a) {
		t.Fatalf("tags %v, then %v: want one, the same each time", a, one.Tags(msg, ad))
	}
	if strings.Contains(a[0], "sev1") {
		t.Errorf("the tag holds the message: %q", a[0])
	}
	for name, b := range map[string][]string{
		"another message":         one.Tags([]byte("how many sev2 incidents?"), ad),
		"another place":           one.Tags(msg, []byte("elsewhere")),
		"the place moved into ad": one.Tags([]byte("sev1 incidents?"), []byte("placehow many ")),
		"another key, same id":    other.Tags(msg, ad),
	} {
		if b[0] == a[0] {
			t.Errorf("%s: the same tag %q", name, b[0])
		}
	}
	r := rotated.Tags(msg, ad)
	if len(r) != 2 || r[1] != a[0] || r[0] == a[0] {
		t.Errorf("after a rotation: %v, want the new key's tag, then the old one's %q", r, a[0])
	}
}
