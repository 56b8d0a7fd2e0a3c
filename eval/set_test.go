package eval_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/das-ask/ask/demo/source"
	"github.com/das-ask/ask/eval"
	"github.com/das-ask/ask/gen"
)

func TestParseSetRejects(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"no name", "items: [{id: a, question: q, expect: answer}]", "no name"},
		{"no items", "name: s", "no items"},
		{"unknown field", "name: s\nitems: [{id: a, question: q, expect: answer, sqll: x}]", "sqll"},
		{"bad kind", "name: s\nitems: [{id: a, question: q, expect: maybe}]", "expect must be"},
		{"duplicate id", "name: s\nitems: [{id: a, question: q, expect: abstention}, {id: a, question: r, expect: abstention}]", "duplicate id"},
		{"bad id", "name: s\nitems: [{id: 'A b', question: q, expect: abstention}]", "id must match"},
		{"no question", "name: s\nitems: [{id: a, expect: abstention}]", "no question"},
		{"sql on a refusal", "name: s\nitems: [{id: a, question: q, expect: refusal, sql: SELECT 1}]", "describe an answer"},
		{"terms on an abstention", "name: s\nitems: [{id: a, question: q, expect: abstention, terms: [x]}]", "describe an answer"},
		{"an infinite tolerance", "name: s\nitems: [{id: a, question: q, expect: answer, sql: SELECT 1, tolerance: .inf}]", "tolerance must be a finite number"},
		{"a tolerance that is not a number", "name: s\nitems: [{id: a, question: q, expect: answer, sql: SELECT 1, tolerance: .nan}]", "tolerance must be a finite number"},
		{"a negative tolerance", "name: s\nitems: [{id: a, question: q, expect: answer, sql: SELECT 1, tolerance: -1}]", "tolerance must be a finite number"},
		{"bad path", "name: s\nitems: [{id: a, question: q, expect: answer, path: slow}]", "path must be"},
		{"unknown top-level field", "name: s\nitmes: [{id: a, question: q, expect: answer}]", `line 2: unknown field "itmes"`},
		{"no id", "name: s\nitems: [{question: q, expect: abstention}]", "item 1 (): no id"},
		{"an empty file", "", "the file is empty"},
		{"a second document", "name: s\nitems: [{id: a, question: q, expect: abstention}]\n---\nname: t\n", "more than one YAML document"},
		{"a question the service cannot admit", "name: s\nitems: [{id: a, question: '" + strings.Repeat("é", eval.MaxQuestion+1) + "', expect: abstention}]", "4001 characters; the service admits at most 4000"},
		{"a field of the wrong type, on one line", "name: s\nitems: [{id: a, question: q, expect: answer, tolerance: lots, ordered: maybe}]", "line 2: cannot unmarshal !!str `lots` into float64; line 2: cannot unmarshal !!str `maybe` into bool"},
		{"two identities in one conversation", "name: s\nitems: [{id: a, question: q, expect: answer, conversation: c}, {id: b, as: bob, question: r, expect: answer, conversation: c}]", "belongs to one identity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := eval.ParseSet([]byte(tc.yaml), "t.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("one fault, one line: got %q", err)
			}
		})
	}
}

// A file far larger than any set is refused by its size, before it is read whole or parsed.
func TestLoadSetRefusesAHugeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.yaml")
	if err := os.WriteFile(path, []byte("name: s\ndescription: "), 0o644); err != nil {
		t.Fatal(err)
	}
	// Sparse: one byte over the limit, without taking the disk.
	if err := os.Truncate(path, eval.MaxSetBytes+1); err != nil {
		t.Fatal(err)
	}
	_, err := eval.LoadSet(path)
	if err == nil || !strings.Contains(err.Error(), "larger than 32 MiB") {
		t.Fatalf("got %v, want the set refused for its size", err)
	}
}

// A question of exactly the contract's maximum is a question the service admits.
func TestParseSetLongestQuestion(t *testing.T) {
	if _, err := eval.ParseSet([]byte("name: s\nitems: [{id: a, question: '"+strings.Repeat("é", eval.MaxQuestion)+"', expect: abstention}]"), "t.yaml"); err != nil {
		t.Fatal(err)
	}
}

// MaxQuestion is the contract's: the published AskRequest.question maxLength.
func TestMaxQuestionIsTheContracts(t *testing.T) {
	spec, err := gen.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	q := spec.Components.Schemas["AskRequest"].Value.Properties["question"].Value
	if q.MaxLength == nil || *q.MaxLength != eval.MaxQuestion {
		t.Errorf("the contract's question maxLength is %v, eval.MaxQuestion %d", q.MaxLength, eval.MaxQuestion)
	}
}

func TestParseSetDefaults(t *testing.T) {
	s, err := eval.ParseSet([]byte("name: s\nas: bob\nitems:\n- {id: a, question: ' q ', expect: answer, terms: [x]}\n- {id: b, question: r, expect: answer, terms: [x], caveats: []}\n- {id: c, as: alice, question: r, expect: abstention}\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a, b := s.Items[0], s.Items[1]
	if a.As != "bob" || a.Question != "q" || a.Category != "uncategorised" {
		t.Errorf("defaults: got as %q, question %q, category %q", a.As, a.Question, a.Category)
	}
	if got := a.CaveatTerms(); len(got) != 1 || got[0] != "x" {
		t.Errorf("caveats default to the terms: got %v", got)
	}
	if got := b.CaveatTerms(); len(got) != 0 {
		t.Errorf("caveats: [] requires none: got %v", got)
	}
	if got := s.Identities(); strings.Join(got, ",") != "bob,alice" {
		t.Errorf("identities: got %v", got)
	}
}

// The default set is what the issue asks for: at least 40 questions, every kind of question,
// and every expected result computable against the demo dataset.
func TestDefaultSet(t *testing.T) {
	s, err := eval.DefaultSet()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Items) < 40 {
		t.Errorf("%d items, want at least 40", len(s.Items))
	}
	cats := map[string]int{}
	kinds := map[string]int{}
	convs := map[string]int{}
	byIdentity := map[string]map[string]bool{}
	for _, it := range s.Items {
		cats[it.Category]++
		kinds[it.Expect]++
		if it.Conversation != "" {
			convs[it.Conversation]++
		}
		if byIdentity[it.As] == nil {
			byIdentity[it.As] = map[string]bool{}
		}
		byIdentity[it.As][it.Expect] = true
		if it.Expect == eval.KindAnswer && len(it.Terms) == 0 {
			t.Errorf("%s: an answer with no catalog terms to rest on", it.ID)
		}
		if it.Expect == eval.KindAnswer && it.SQL == "" && it.Path != "fast" {
			t.Errorf("%s: an answer with no expected result must be catalog-only (path: fast)", it.ID)
		}
	}
	for _, c := range []string{"one-figure", "join", "group-by", "follow-up", "definition", "abstention", "refusal", "identity"} {
		if cats[c] == 0 {
			t.Errorf("no %s item", c)
		}
	}
	for _, k := range []string{eval.KindAnswer, eval.KindAbstention, eval.KindRefusal} {
		if kinds[k] == 0 {
			t.Errorf("no item expects %s", k)
		}
	}
	multi := 0
	for _, n := range convs {
		if n > 1 {
			multi++
		}
	}
	if multi == 0 {
		t.Error("no conversation with a follow-up")
	}
	if b := byIdentity["bob"]; !b[eval.KindAnswer] || !b[eval.KindAbstention] || !b[eval.KindRefusal] {
		t.Errorf("bob should be answered, abstained and refused; expects %v", b)
	}

	truth, err := source.OpenTruth(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer truth.Close()
	for _, it := range s.Items {
		if it.SQL == "" {
			continue
		}
		_, rows, err := truth.Query(t.Context(), it.SQL)
		switch {
		case err != nil:
			t.Errorf("%s: %v", it.ID, err)
		case len(rows) == 0:
			t.Errorf("%s: the expected result is empty, which scores nothing", it.ID)
		}
	}
}

// The truth database is read-only, like the source's run_query.
func TestTruthIsReadOnly(t *testing.T) {
	truth, err := source.OpenTruth(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer truth.Close()
	if _, _, err := truth.Query(t.Context(), "DELETE FROM incidents"); err == nil {
		t.Fatal("a DELETE ran")
	}
	_, rows, err := truth.Query(t.Context(), "SELECT COUNT(*) FROM oncall_pay")
	if err != nil || len(rows) != 1 {
		t.Fatalf("the truth reads every table, oncall_pay included: %v %v", rows, err)
	}
}
