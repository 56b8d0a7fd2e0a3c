package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/das-ask/ask/config"
)

// TestUnknownNamesAMisspeltSetting: a DAS_ variable no reader reads is refused by name, with
// the setting it was meant to be, as an invalid setting (exit 2); known settings and other
// prefixes pass, and no value is ever in the message.
func TestUnknownNamesAMisspeltSetting(t *testing.T) {
	err := config.Unknown([]string{"PATH", "HOME", "ASK_URL", "DAS_ASK_TTL_S", "DAS_JWKS_URL", "DAS_ASK_TLL_S", "DAS_ASK_SEAL_KEY", "DAS_WHATEVER_ELSE_ENTIRELY", "DAS_ASK_TLL_S"})
	if err == nil {
		t.Fatal("misspelt DAS_ settings were accepted")
	}
	if !errors.Is(err, config.ErrInvalid) {
		t.Errorf("the error does not match ErrInvalid (askd's exit status 2): %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"DAS_ASK_TLL_S: no such setting (did you mean DAS_ASK_TTL_S?)",
		"DAS_ASK_SEAL_KEY: no such setting (did you mean DAS_ASK_SEAL_KEYS?)",
		"DAS_WHATEVER_ELSE_ENTIRELY: no such setting;",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q:\n%s", want, msg)
		}
	}
	if strings.Count(msg, "DAS_ASK_TLL_S:") != 1 {
		t.Errorf("a name set twice is named twice:\n%s", msg)
	}
	for _, ok := range []string{"DAS_ASK_TTL_S:", "DAS_JWKS_URL:", "PATH", "ASK_URL"} {
		if strings.Contains(msg, ok) {
			t.Errorf("the error names %s, which is fine:\n%s", ok, msg)
		}
	}
	if err := config.Unknown(append(config.KnownNames(), "PATH", "ASK_LLM")); err != nil {
		t.Errorf("known settings refused: %v", err)
	}
}

// TestKnownNamesAreEveryDASLiteral: KnownNames finds its names by running the readers, which
// sees a setting only if it is read unconditionally; every DAS_ name package config (and auth,
// whose names it reads) spells, and every one README's Configuration documents, must be in it,
// or setting it would be refused as a misspelling.
func TestKnownNamesAreEveryDASLiteral(t *testing.T) {
	known := config.KnownNames()
	if len(known) < 30 {
		t.Fatalf("KnownNames found %d settings: %v", len(known), known)
	}
	name := regexp.MustCompile(`DAS_[A-Z0-9_]*[A-Z0-9]`)
	var files []string
	for _, glob := range []string{"*.go", "../auth/*.go", "../README.md"} {
		m, err := filepath.Glob(glob)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "names.go" { // names.go spells a misspelling
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range name.FindAllString(string(b), -1) {
			if n == "DAS_ASK" || n == "DAS_ASK_WEBHOOK" || n == "DAS_DEMO_SOURCE" {
				continue // a family named in prose (DAS_ASK_*)
			}
			if n == "DAS_ASK_TLL_S" {
				continue // README's example of a misspelling
			}
			if !slices.Contains(known, n) {
				t.Errorf("%s names %s, which no reader asks for: it would be refused as a misspelling", f, n)
			}
		}
	}
}
