package conformance_test

import (
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
