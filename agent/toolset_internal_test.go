package agent

import (
	"regexp"
	"strings"
	"testing"

	"github.com/das-ask/ask/agent/source"
)

// providerName is what OpenAI and Anthropic take as a tool's name.
var providerName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func tools(pairs ...string) []source.Tool {
	var out []source.Tool
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, source.Tool{Source: pairs[i], Name: pairs[i+1]})
	}
	return out
}

// TestModelNames: whatever names the sources declare and however long their configured names,
// every name the model is given is one the providers take, no two are the same, and the same
// tools are given the same names every time. A name that needs no change is kept.
func TestModelNames(t *testing.T) {
	long := strings.Repeat("warehouse_", 7) // 70 characters
	tests := []struct {
		name  string
		tools []source.Tool
		want  []string // "" where only the rule (valid, unique, prefix) is checked
	}{
		{"kept as is", tools("demo", "search_catalog", "demo", "run-query"), []string{"search_catalog", "run-query"}},
		{"a dot, a slash, a space", tools("s", "catalog.search", "s", "db/run query"), []string{"catalog_search", "db_run_query"}},
		{"non-ASCII", tools("s", "données", "s", "検索"), []string{"donn_es", "__"}},
		{"the same name in two sources", tools("demo", "run_query", "wh", "run_query"), []string{"demo__run_query", "wh__run_query"}},
		{"a source name past 64 with a shared tool", tools(long, "run_query", "demo", "run_query"), []string{"", "demo__run_query"}},
		{"a tool name past 64", tools("s", strings.Repeat("x", 128)), []string{""}},
		{"two names that sanitize alike", tools("s", "a.b", "s", "a/b"), []string{"", ""}},
		{"a changed name never takes an unchanged one's", tools("s", "a.b", "s", "a_b"), []string{"", "a_b"}},
		{"an unchanged name keeps its name after a changed one", tools("s", "a_b", "s", "a.b"), []string{"a_b", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := modelNames(tt.tools)
			again := modelNames(tt.tools)
			seen := map[string]bool{}
			for i, n := range got {
				if !providerName.MatchString(n) {
					t.Errorf("%q (for %s/%q) is not a name the providers take", n, tt.tools[i].Source, tt.tools[i].Name)
				}
				if seen[n] {
					t.Errorf("%q given twice: %q", n, got)
				}
				seen[n] = true
				if again[i] != n {
					t.Errorf("%q named %q, then %q", tt.tools[i].Name, n, again[i])
				}
				if tt.want[i] != "" && n != tt.want[i] {
					t.Errorf("%s/%q named %q, want %q", tt.tools[i].Source, tt.tools[i].Name, n, tt.want[i])
				}
				if tt.want[i] == "" && !regexp.MustCompile(`_[0-9a-f]{8}$`).MatchString(n) {
					t.Errorf("%s/%q named %q, want a name with a hash suffix", tt.tools[i].Source, tt.tools[i].Name, n)
				}
			}
		})
	}

	// A hashed name depends on the tool, not on what else the run offers: the same tool is named
	// alike beside other tools, and two sources' tools of the same name differently.
	a := modelNames(tools("s", strings.Repeat("y", 70)))[0]
	b := modelNames(tools("other", "t", "s", strings.Repeat("y", 70)))[1]
	c := modelNames(tools("s2", strings.Repeat("y", 70)))[0]
	if a != b || a == c {
		t.Errorf("names %q, %q (same tool) and %q (another source's), want the first two alike", a, b, c)
	}
	if !strings.HasPrefix(a, strings.Repeat("y", 55)+"_") {
		t.Errorf("%q: want the name cut to 55 characters, then the hash", a)
	}
	// A long "<source>__<tool>" loses the source's part first: the tool's name says more.
	long = modelNames(tools(strings.Repeat("s", 70), "run_query", "b", "run_query"))[0]
	if want := strings.Repeat("s", 44) + "__run_query_"; !strings.HasPrefix(long, want) {
		t.Errorf("%q, want it to start %q", long, want)
	}
}
