package conformance_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/das-ask/ask/conformance"
)

// README.md's table names every check the suite makes, so a reader can find what each asserts.
func TestTheREADMEListsEveryCheck(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "| ") {
			rows = append(rows, strings.SplitN(l, "|", 3)[1])
		}
	}
	table := strings.Join(rows, "\n")
	for _, name := range conformance.Names() {
		if !strings.Contains(table, name) {
			t.Errorf("README.md's table of checks does not name %s", name)
		}
	}
}

// The repository's README.md (Status) and docs/parity.md give the suite's counts as CI
// witnesses them, every check passing: they must count the checks the suite has (the gateway
// adds its two silence checks, and without --behaviour the six behaviour checks skip). A check
// added without them left the counts one short.
func TestTheStatusCountsEveryCheck(t *testing.T) {
	n := len(conformance.Names())
	behaviour := 0
	for _, name := range conformance.Names() {
		if strings.HasPrefix(name, "behaviour.") {
			behaviour++
		}
	}
	readme := flat(t, "../README.md")
	parity := flat(t, "../docs/parity.md")
	for _, want := range []struct{ doc, text, where string }{
		{readme, fmt.Sprintf("`make conformance-ask ARGS=--behaviour` %d passed / 0 failed / 0 skipped", n), "README.md"},
		{readme, fmt.Sprintf("`make conformance-gateway ARGS=--behaviour` %d / 0 / 0", n+2), "README.md"},
		{readme, fmt.Sprintf("without the %s behaviour checks, %d / 0 / %d and %d / 0 / %d", spelled(t, behaviour),
			n-behaviour, behaviour, n+2-behaviour, behaviour), "README.md"},
		{readme, fmt.Sprintf("the same suite %d / 0 / 0 through nginx in front of three replicas", n), "README.md"},
		{readme, fmt.Sprintf("`make cluster-check-rediscluster`): %d / 0 / 0 each", n), "README.md"},
		{readme, fmt.Sprintf("the same suite %d / 0 / 0 through nginx with the store on a three-primary Redis Cluster", n), "README.md"},
		{parity, fmt.Sprintf("(%d / 0 / 0 directly, on the replicas and on the Redis Cluster, %d / 0 / 0 through the", n, n+2), "docs/parity.md"},
	} {
		if !strings.Contains(want.doc, want.text) {
			t.Errorf("%s does not say %q (the suite has %d checks)", want.where, want.text, n)
		}
	}
}

// flat is the file's text with every run of white space one space, so a sentence is found
// however it is wrapped.
func flat(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

func spelled(t *testing.T, n int) string {
	t.Helper()
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}
	if n >= len(words) {
		t.Fatalf("%d behaviour checks: spell it", n)
	}
	return words[n]
}
