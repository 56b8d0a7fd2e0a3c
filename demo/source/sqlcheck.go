package source

import (
	"strings"
	"unicode"
)

// statementVerdict is what the lexical check found in a query before SQLite sees it.
type statementVerdict int

const (
	// stmtSelect: one statement beginning with SELECT or WITH (SQLite's authorizer still vets it).
	stmtSelect statementVerdict = iota
	// stmtEmpty: nothing but whitespace and comments.
	stmtEmpty
	// stmtMultiple: more than one statement; refused, whatever the statements are.
	stmtMultiple
	// stmtWrite: one statement whose first keyword changes the database, its schema, its
	// attachments or the connection's settings; refused.
	stmtWrite
	// stmtOther: one statement that is neither a query nor a known write (a typo, EXPLAIN…);
	// an ordinary error for the model to correct.
	stmtOther
)

// isWriteKeyword reports the first keywords of statements that are not queries. A statement
// starting with one of them is a write attempt and is refused as such.
func isWriteKeyword(w string) bool {
	switch w {
	case "INSERT", "UPDATE", "DELETE", "REPLACE", "UPSERT",
		"CREATE", "DROP", "ALTER", "VACUUM", "REINDEX", "ANALYZE",
		"ATTACH", "DETACH", "PRAGMA",
		"BEGIN", "COMMIT", "END", "ROLLBACK", "SAVEPOINT", "RELEASE":
		return true
	}
	return false
}

// checkStatement scans sql with SQLite's lexical rules for strings ('…'), quoted identifiers
// ("…", `…`, […]) and comments (-- and /* */), and reports whether it is exactly one statement
// and what its first keyword makes it. It returns the first keyword, upper-cased, for messages.
//
// This check is the first of two gates, not the only one: SQLite's authorizer denies every
// action other than reading (see query.go), so a write hidden where this scan cannot see it —
// a writable CTE, a function with side effects — is still refused when SQLite compiles it.
func checkStatement(sql string) (statementVerdict, string) {
	first := ""
	statements := 0
	inStatement := false
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == ';':
			inStatement = false
			i++
			continue
		case c == '-' && i+1 < len(sql) && sql[i+1] == '-':
			if j := strings.IndexByte(sql[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(sql)
			}
			continue
		case c == '/' && i+1 < len(sql) && sql[i+1] == '*':
			if j := strings.Index(sql[i+2:], "*/"); j >= 0 {
				i += 2 + j + 2
			} else {
				i = len(sql) // SQLite accepts an unterminated trailing comment
			}
			continue
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
			continue
		}
		// Any other character is statement text.
		if !inStatement {
			inStatement = true
			statements++
			if statements == 1 {
				first = leadingWord(sql[i:])
			}
		}
		switch c {
		case '\'', '"', '`':
			i = skipQuoted(sql, i, c)
		case '[':
			if j := strings.IndexByte(sql[i:], ']'); j >= 0 {
				i += j + 1
			} else {
				i = len(sql)
			}
		default:
			i++
		}
	}
	switch {
	case statements == 0:
		return stmtEmpty, ""
	case statements > 1:
		return stmtMultiple, first
	case first == "SELECT" || first == "WITH":
		return stmtSelect, first
	case isWriteKeyword(first):
		return stmtWrite, first
	default:
		return stmtOther, first
	}
}

// skipQuoted returns the index just past the quoted token starting at sql[i] (quote q), where a
// doubled quote is an escaped one.
func skipQuoted(sql string, i int, q byte) int {
	for j := i + 1; j < len(sql); j++ {
		if sql[j] == q {
			if j+1 < len(sql) && sql[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(sql)
}

// leadingWord is the run of letters at the start of s, upper-cased.
func leadingWord(s string) string {
	end := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && r != '_' })
	if end < 0 {
		end = len(s)
	}
	return strings.ToUpper(s[:end])
}
