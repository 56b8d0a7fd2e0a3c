package eval

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Outcome kinds, as the contract names the terminal events.
const (
	KindAnswer     = "answer"
	KindAbstention = "abstention"
	KindRefusal    = "refusal"
	KindError      = "error"
)

// Kinds are the outcome kinds in the order reports show them.
var Kinds = []string{KindAnswer, KindAbstention, KindRefusal, KindError}

// Set is a question set: what to ask, as whom, and what should come of it.
//
// The file format (YAML; see eval/sets/demo.yaml and docs/eval.md):
//
//	name: demo
//	description: …
//	items:
//	  - id: sev1-2026-q2            # unique, [a-z0-9._-]
//	    category: one-figure        # free text; scores are also reported per category
//	    as: alice                   # the identity asking (default: the set's `as`, else alice)
//	    conversation: team-q3       # optional: items sharing it are asked in one conversation, in file order
//	    question: How many sev1 incidents did we have in 2026-Q2?
//	    expect: answer              # answer | abstention | refusal | error
//	    sql: SELECT COUNT(*) FROM incidents WHERE …   # answers: the expected result, run when the eval runs
//	    ordered: false              # answers: whether row order matters (default false)
//	    tolerance: 0.01             # answers: absolute tolerance for numbers (default exact)
//	    path: fast                  # answers: fast | full, when it matters
//	    headline: true              # answers: whether a headline must (true) or must not (false) be present
//	    terms: [incident]           # answers: the catalog terms the answer must rest on (provenance)
//	    caveats: [incident]         # answers: terms whose caveats must be carried; default: terms
type Set struct {
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description" json:"description,omitempty"`
	// As is the default identity of the set's items.
	As    string `yaml:"as" json:"-"`
	Items []Item `yaml:"items" json:"-"`
	// File is where the set was read from ("embedded" for the default set).
	File string `yaml:"-" json:"file"`
}

// Item is one question of a set.
type Item struct {
	ID           string   `yaml:"id"`
	Category     string   `yaml:"category"`
	As           string   `yaml:"as"`
	Conversation string   `yaml:"conversation"`
	Question     string   `yaml:"question"`
	Expect       string   `yaml:"expect"`
	SQL          string   `yaml:"sql"`
	Ordered      bool     `yaml:"ordered"`
	Tolerance    float64  `yaml:"tolerance"`
	Path         string   `yaml:"path"`
	Headline     *bool    `yaml:"headline"`
	Terms        []string `yaml:"terms"`
	Caveats      []string `yaml:"caveats"`
	// caveatsSet records whether the file said caveats (an empty list means none are required).
	caveatsSet bool
}

// UnmarshalYAML reads an item and remembers whether caveats were given.
func (it *Item) UnmarshalYAML(n *yaml.Node) error {
	type plain Item
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*it = Item(p)
	// Decoding through a node loses the decoder's KnownFields; check the keys here.
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch k := n.Content[i].Value; k {
		case "caveats":
			it.caveatsSet = true
		case "id", "category", "as", "conversation", "question", "expect", "sql", "ordered", "tolerance", "path", "headline", "terms":
		default:
			return fmt.Errorf("line %d: unknown field %q in an item", n.Content[i].Line, k)
		}
	}
	return nil
}

// CaveatTerms are the terms whose caveats the answer must carry.
func (it Item) CaveatTerms() []string {
	if it.caveatsSet {
		return it.Caveats
	}
	return it.Terms
}

// Checked reports whether the item's answer can be judged correct or not: it names an expected
// result, path or headline.
func (it Item) Checked() bool {
	return it.Expect == KindAnswer && (it.SQL != "" || it.Path != "" || it.Headline != nil)
}

//go:embed sets/demo.yaml
var defaultSet []byte

// DefaultSet is the set committed at eval/sets/demo.yaml, over the demo source's data.
func DefaultSet() (*Set, error) { return ParseSet(defaultSet, "embedded:eval/sets/demo.yaml") }

// MaxSetBytes is the largest set file LoadSet reads: a thousand items of the longest question the
// service admits fit in a tenth of it. A larger file is refused before it is read whole, so a
// wrong path (a dump, a device) costs nothing, and no report repeats megabytes of description.
const MaxSetBytes = 32 << 20

// LoadSet reads and checks a set file.
func LoadSet(path string) (*Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("set: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSetBytes+1))
	if err != nil {
		return nil, fmt.Errorf("set: %w", err)
	}
	if len(b) > MaxSetBytes {
		return nil, fmt.Errorf("set %s: larger than %d MiB; a set is a list of questions, not data", path, MaxSetBytes>>20)
	}
	return ParseSet(b, path)
}

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

// MaxQuestion is the longest question the contract admits, in characters (AskRequest.question's
// maxLength in openapi/ask.openapi.yaml): a longer one could never be asked, so the set is refused.
const MaxQuestion = 4000

// ParseSet decodes a set (unknown fields are errors, so a typo is not silently ignored) and
// checks it: unique ids, a question and a known kind for each item, answer-only fields only on
// answers, one identity per conversation.
func ParseSet(b []byte, file string) (*Set, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var s Set
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("set %s: the file is empty", file)
		}
		return nil, fmt.Errorf("set %s: %s", file, oneLine(err))
	}
	// A second document would be ignored, and with it whatever the operator meant by it.
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("set %s: more than one YAML document (a set is one document; remove the ---)", file)
	}
	s.File = file
	if s.Name == "" {
		return nil, fmt.Errorf("set %s: no name", file)
	}
	if len(s.Items) == 0 {
		return nil, fmt.Errorf("set %s: no items", file)
	}
	if s.As == "" {
		s.As = "alice"
	}
	var errs []error
	seen := map[string]bool{}
	convAs := map[string]string{}
	for i := range s.Items {
		it := &s.Items[i]
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("set %s: item %d (%s): %s", file, i+1, it.ID, fmt.Sprintf(format, a...)))
		}
		if it.As == "" {
			it.As = s.As
		}
		if it.Category == "" {
			it.Category = "uncategorised"
		}
		it.Question = strings.TrimSpace(it.Question)
		switch {
		case it.ID == "":
			bad("no id")
		case !idPattern.MatchString(it.ID):
			bad("id must match %s", idPattern)
		case seen[it.ID]:
			bad("duplicate id")
		}
		seen[it.ID] = true
		if it.Question == "" {
			bad("no question")
		} else if n := utf8.RuneCountInString(it.Question); n > MaxQuestion {
			bad("the question has %d characters; the service admits at most %d", n, MaxQuestion)
		}
		switch it.Expect {
		case KindAnswer, KindAbstention, KindRefusal, KindError:
		default:
			bad("expect must be answer, abstention, refusal or error, not %q", it.Expect)
		}
		if it.Expect != KindAnswer && (it.SQL != "" || it.Path != "" || it.Headline != nil || len(it.Terms) > 0 || it.caveatsSet || it.Ordered || it.Tolerance != 0) {
			bad("sql, path, headline, terms, caveats, ordered and tolerance describe an answer; this item expects %s", it.Expect)
		}
		if it.Path != "" && it.Path != "fast" && it.Path != "full" {
			bad("path must be fast or full, not %q", it.Path)
		}
		if it.Tolerance < 0 || math.IsNaN(it.Tolerance) || math.IsInf(it.Tolerance, 0) {
			// .inf would pass any number, .nan none that is not exact.
			bad("tolerance must be a finite number, not negative")
		}
		if it.Conversation != "" {
			if as, ok := convAs[it.Conversation]; ok && as != it.As {
				bad("conversation %q is %s's; a conversation belongs to one identity", it.Conversation, as)
			}
			convAs[it.Conversation] = it.As
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &s, nil
}

var unknownField = regexp.MustCompile(`field (\S+) not found in type eval\.\w+`)

// oneLine puts a YAML decoding error on one line: the decoder lists each field it could not
// decode on a line of its own.
func oneLine(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			// "field itmes not found in type eval.Set" names a Go type the operator never saw.
			msgs[i] = unknownField.ReplaceAllString(m, `unknown field "$1"`)
		}
		return strings.Join(msgs, "; ")
	}
	return err.Error()
}

// MostConversations is the most conversations the set opens as one identity: one per item
// outside a conversation, one per conversation.
func (s *Set) MostConversations() int {
	n := map[string]int{}
	seen := map[string]bool{}
	most := 0
	for _, it := range s.Items {
		if it.Conversation != "" {
			if seen[it.Conversation] {
				continue
			}
			seen[it.Conversation] = true
		}
		n[it.As]++
		most = max(most, n[it.As])
	}
	return most
}

// Identities are the identities the set asks as, sorted by first use.
func (s *Set) Identities() []string {
	var out []string
	seen := map[string]bool{}
	for _, it := range s.Items {
		if !seen[it.As] {
			seen[it.As] = true
			out = append(out, it.As)
		}
	}
	return out
}
