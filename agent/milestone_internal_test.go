package agent

import (
	"slices"
	"testing"

	ask "github.com/das-ask/ask"
)

func TestTablesOf(t *testing.T) {
	tests := map[string][]string{
		"SELECT COUNT(*) FROM incidents WHERE severity = 'sev1'":                             {"incidents"},
		"select t.name from incidents i join services s on s.id = i.service_id JOIN teams t": {"incidents", "services", "teams"},
		`SELECT * FROM "oncall_pay" p JOIN teams t ON t.id = p.team_id JOIN teams u`:         {"oncall_pay", "teams"},
		"SELECT 1": nil,
	}
	for sql, want := range tests {
		if got := tablesOf(sql); !slices.Equal(got, want) {
			t.Errorf("tablesOf(%q) = %v, want %v", sql, got, want)
		}
	}
}

func TestCleanSubject(t *testing.T) {
	l := newLedger(ask.Request{Question: "How many sev1 incidents did we have?"})
	tests := map[string]string{
		"incident":                                    "incident",
		"  change   failure rate ":                    "change failure rate",
		"how many SEV1 incidents did we have":         "",
		"x: how many sev1 incidents did we have":      "",
		"é" + string(slices.Repeat([]rune("a"), 100)): "é" + string(slices.Repeat([]rune("a"), maxSubject-1)),
	}
	for in, want := range tests {
		if got := l.clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSourceMessagesQuotingAQuestionAreWithheld(t *testing.T) {
	l := newLedger(ask.Request{Question: "How many sev1 incidents did we have?",
		History: []ask.Turn{{Question: "Which team owns checkout?"}}})
	tests := map[string]string{
		"identity bob may not read table oncall_pay":                    "identity bob may not read table oncall_pay",
		`no term "how many SEV1 incidents did we have"`:                 withheld,
		"refused: which team owns checkout is not a table":              withheld,
		"Which team owns checkout? How many sev1 incidents did we have": withheld,
	}
	for in, want := range tests {
		if got := l.shown(in); got != want {
			t.Errorf("shown(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestShortFollowUpsAreNotWithheld: the question is kept out of every event but accepted, as
// whole words: a long question restated in prose is replaced, while a follow-up of a word or
// two ("and Q3?", "Why?") is the answer's own vocabulary, and neither the SQL that filters on it
// nor the prose that uses it is withheld; nor is a word that merely contains a question.
func TestShortFollowUpsAreNotWithheld(t *testing.T) {
	const long = "How many sev1 incidents did we have in 2026-Q2?"
	l := newLedger(ask.Request{Question: "and Q3?", History: []ask.Turn{{Question: long}, {Question: "Why?"}}})
	for _, c := range []struct{ in, want string }{
		{"In Q2 and Q3 the rate rose. Why: more deploys.", "In Q2 and Q3 the rate rose. Why: more deploys."},
		{"You asked: how many SEV1 incidents did we have in 2026 Q2. We had 10.", "You asked: [the question]. We had 10."},
		// the question's words inside longer ones are not the question
		{"How many sev1 incidents did we have in 2026-Q2x", "How many sev1 incidents did we have in 2026-Q2x"},
	} {
		if got := l.prose(c.in); got != c.want {
			t.Errorf("prose(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	sql := "SELECT COUNT(*) FROM incidents WHERE quarter = '2026-Q3' and severity = 'sev1'"
	if l.isQuestion(sql) {
		t.Errorf("the SQL %q was taken for a question", sql)
	}
	if !l.isQuestion("search: How many sev1 incidents did we have in 2026-Q2") {
		t.Error("an argument holding the earlier question was not taken for it")
	}
	// A short question is still withheld where a text is that question whole: a search for
	// it verbatim, its terms tried, a source's message that is just the question.
	for _, s := range []string{"and Q3", "AND q3?", "why"} {
		if !l.isQuestion(s) {
			t.Errorf("%q, a short question verbatim, was not taken for it", s)
		}
	}
	if got := l.prose("Why?"); got != redacted {
		t.Errorf("prose that is a short question whole: %q", got)
	}
	if got := l.redact(map[string]any{"query": "and Q3?", "limit": "Q3"}); got["query"] != redacted || got["limit"] != "Q3" {
		t.Errorf("args searching for the short question verbatim: %v", got)
	}
	// A single long word is distinctive: a restatement of it is withheld.
	l = newLedger(ask.Request{Question: "Supercalifragilisticexpialidocious?"})
	if got := l.prose("Supercalifragilisticexpialidocious is not a table."); got != "[the question] is not a table." {
		t.Errorf("prose of a long one-word question: %q", got)
	}
}

// A source's message may quote the question escaped: a service that escapes every character
// outside ASCII (Python's json.dumps by default) wrote "What does ZQXJ-canary-7731
// \u00dcn\u00efc\u00f8d\u00e9-\u043a\u043b\u044e\u0447 mean?" in a tool error, and the step
// event carried it, found from outside on 2026-12-05: normalize reads "u043a" as a word, so the
// question was not found. Each form decodes to the question and is withheld; text whose escapes
// decode to something else is shown as it came.
func TestSourceMessagesQuotingAnEscapedQuestionAreWithheld(t *testing.T) {
	l := newLedger(ask.Request{Question: "What does Ünïcødé-ключ 金丝雀 mean for 🚀 launches?"})
	for _, in := range []string{
		`could not use "What does \u00dcn\u00efc\u00f8d\u00e9-\u043a\u043b\u044e\u0447 \u91d1\u4e1d\u96c0 mean for \ud83d\ude80 launches?"`,
		`{\"query\":\"what does \\u00dcn\\u00efc\\u00f8d\\u00e9-\\u043a\\u043b\\u044e\\u0447 \\u91d1\\u4e1d\\u96c0 mean for \\ud83d\\ude80 launches\"}`,
		`"What does \u00dcn\u00efc\u00f8d\u00e9-\u043a\u043b\u044e\u0447 \u91d1\u4e1d\u96c0 mean for \U0001f680 launches?"`,
		`GET /search?q=What%20does%20%C3%9Cn%C3%AFc%C3%B8d%C3%A9-%D0%BA%D0%BB%D1%8E%D1%87+%E9%87%91%E4%B8%9D%E9%9B%80+mean+for+%F0%9F%9A%80+launches%3F failed`,
		`<p>no match for What does &#220;n&#xef;c&#248;d&#233;-&#x43a;&#1083;&#1102;&#1095; &#37329;&#19997;&#38592; mean for &#x1F680; launches?</p>`,
	} {
		if got := l.shown(in); got != withheld {
			t.Errorf("shown(%q) = %q, want it withheld", in, got)
		}
	}
	for _, in := range []string{
		`no term "\u043a\u043b\u044e\u0447" in the catalog`,
		`SELECT 100%25 AS p FROM t WHERE name LIKE '%D0%' -- \u00e9 &amp; &#xZZ; \uD800 \u12`,
	} {
		if got := l.shown(in); got != in {
			t.Errorf("shown(%q) = %q, want it shown", in, got)
		}
	}
}
