package source

import "testing"

func TestCheckStatement(t *testing.T) {
	for _, tc := range []struct {
		sql   string
		want  statementVerdict
		first string
	}{
		{"SELECT 1", stmtSelect, "SELECT"},
		{"  select 1;  ", stmtSelect, "SELECT"},
		{"SELECT 1; -- trailing comment", stmtSelect, "SELECT"},
		{"SELECT 1; /* trailing */ ;;", stmtSelect, "SELECT"},
		{"/* c */ -- d\n WITH x AS (SELECT 1) SELECT * FROM x", stmtSelect, "WITH"},
		{"SELECT 'a;b'", stmtSelect, "SELECT"},
		{`SELECT "we;ird" FROM t`, stmtSelect, "SELECT"},
		{"SELECT `a;b`, [c;d] FROM t", stmtSelect, "SELECT"},
		{"SELECT 'it''s; fine'", stmtSelect, "SELECT"},
		{"SELECT '-- not a comment'; DROP TABLE t", stmtMultiple, "SELECT"},
		{"SELECT '/* not a comment'; DROP TABLE t", stmtMultiple, "SELECT"},
		{"SELECT 1; DROP TABLE t", stmtMultiple, "SELECT"},
		{"SELECT 1;SELECT 2", stmtMultiple, "SELECT"},
		{"SELECT 1 /* ; */ ; SELECT 2", stmtMultiple, "SELECT"},
		{"", stmtEmpty, ""},
		{" ; ; -- nothing", stmtEmpty, ""},
		{"INSERT INTO t VALUES (1)", stmtWrite, "INSERT"},
		{"pragma query_only=0", stmtWrite, "PRAGMA"},
		{"ATTACH 'x' AS y", stmtWrite, "ATTACH"},
		{"vacuum", stmtWrite, "VACUUM"},
		{"EXPLAIN SELECT 1", stmtOther, "EXPLAIN"},
		{"SELEC 1", stmtOther, "SELEC"},
		{"(SELECT 1)", stmtOther, ""},
	} {
		got, first := checkStatement(tc.sql)
		if got != tc.want || first != tc.first {
			t.Errorf("checkStatement(%q) = %v, %q; want %v, %q", tc.sql, got, first, tc.want, tc.first)
		}
	}
}
