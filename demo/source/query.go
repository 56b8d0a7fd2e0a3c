package source

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// maxValueBytes is the largest string or blob a query may produce.
const maxValueBytes = 1 << 20

// Refusal codes, carried in a refused tool result's `ask/refusal` meta.
const (
	// CodeForbidden: the caller's identity may not read what the call asked for.
	CodeForbidden = "forbidden"
	// CodeReadOnly: the call tried to change something; this source only reads.
	CodeReadOnly = "read_only"
)

// refusalError is a policy decision, not a mistake: the call is refused and the run that made it
// ends in a refusal. Reason is safe to show the caller.
type refusalError struct {
	Code   string
	Reason string
}

func (e *refusalError) Error() string { return "refused (" + e.Code + "): " + e.Reason }

// queryResult is the run_query result shape of the source tool contract.
type queryResult struct {
	SQL       string   `json:"sql"`
	Columns   []string `json:"columns"`
	Rows      [][]any  `json:"rows"`
	RowCount  int      `json:"row_count"`
	Truncated bool     `json:"truncated"`
}

// querier runs read-only queries on the read pool for one identity at a time.
type querier struct {
	db      *sql.DB
	policy  policy
	rowCap  int
	timeout time.Duration
}

// deniedFunction reports SQL functions that reach outside the database or could be used to
// probe the process; the authorizer refuses them even though the connection is query_only.
func deniedFunction(name string) bool {
	switch strings.ToLower(name) {
	case "load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "sqlite_dbpage":
		return true
	}
	return false
}

// run executes one SELECT for oid. It returns a *refusalError when policy forbids the statement
// (any write, attachment or pragma; more than one statement; a restricted table for this oid)
// and an ordinary error for anything the caller can correct (bad SQL, the time limit).
//
// Three independent gates keep the database read-only: the lexical check (one statement,
// starting with SELECT or WITH), an authorizer installed on the connection for this statement
// that allows nothing but reads, selects, recursive CTEs and harmless functions, and the
// connection's query_only pragma. The authorizer also sees every table the statement reads —
// through joins, subqueries, CTEs and views alike — which is how restricted tables are found.
func (q *querier) run(ctx context.Context, oid, query string) (queryResult, error) {
	switch verdict, first := checkStatement(query); verdict {
	case stmtEmpty:
		return queryResult{}, errors.New("empty query: send one SELECT statement")
	case stmtMultiple:
		return queryResult{}, &refusalError{CodeReadOnly, "only a single SELECT statement is allowed; the query holds more than one statement"}
	case stmtWrite:
		return queryResult{}, &refusalError{CodeReadOnly, "this source is read-only; " + first + " statements are not allowed"}
	case stmtOther:
		return queryResult{}, fmt.Errorf("only SELECT (or WITH … SELECT) queries are supported, not %q", first)
	}

	conn, err := q.db.Conn(ctx)
	if err != nil {
		return queryResult{}, err
	}
	defer conn.Close()

	var (
		mu     sync.Mutex
		denial *refusalError
	)
	deny := func(r *refusalError) sqlite.AuthorizerReturnCode {
		mu.Lock()
		defer mu.Unlock()
		if denial == nil {
			denial = r
		}
		return sqlite.AuthorizerDeny
	}
	authorize := func(action sqlite.AuthorizerActionCode, arg1, arg2, _, _ string) sqlite.AuthorizerReturnCode {
		switch action {
		case sqlite.AuthSelect, sqlite.AuthRecursive:
			return sqlite.AuthorizerOK
		case sqlite.AuthRead:
			if !q.policy.mayRead(oid, arg1) {
				return deny(&refusalError{CodeForbidden, "identity " + oid + " may not read table " + strings.ToLower(arg1)})
			}
			return sqlite.AuthorizerOK
		case sqlite.AuthFunction:
			if deniedFunction(arg2) {
				return deny(&refusalError{CodeReadOnly, "function " + strings.ToLower(arg2) + " is not allowed on this source"})
			}
			return sqlite.AuthorizerOK
		default:
			return deny(&refusalError{CodeReadOnly, "this source is read-only; the statement tries to " + actionName(action)})
		}
	}
	if err := setAuthorizer(conn, authorize); err != nil {
		return queryResult{}, err
	}
	// Leave no per-call policy behind on a pooled connection; if it cannot be removed, the
	// connection is discarded rather than reused.
	defer setAuthorizer(conn, nil)
	// Bound every string and blob a statement can build (zeroblob, printf, group_concat…), so
	// that one query cannot take the process's memory within its time limit.
	if _, err := sqlite.Limit(conn, sqlite3.SQLITE_LIMIT_LENGTH, maxValueBytes); err != nil {
		return queryResult{}, err
	}

	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	res, err := q.collect(ctx, conn, query)
	mu.Lock()
	refused := denial
	mu.Unlock()
	switch {
	case refused != nil:
		return queryResult{}, refused
	case err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return queryResult{}, fmt.Errorf("query cancelled: it ran longer than the %s limit", q.timeout)
	case err != nil:
		return queryResult{}, fmt.Errorf("query failed: %w", err)
	}
	return res, nil
}

// collect reads at most rowCap rows of query's result; one more row marks the result truncated.
func (q *querier) collect(ctx context.Context, conn *sql.Conn, query string) (queryResult, error) {
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		return queryResult{}, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return queryResult{}, err
	}
	res := queryResult{SQL: query, Columns: cols, Rows: [][]any{}}
	for rows.Next() {
		if len(res.Rows) == q.rowCap {
			res.Truncated = true
			break
		}
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return queryResult{}, err
		}
		for i, v := range vals {
			switch x := v.(type) {
			case []byte:
				vals[i] = string(x)
			case time.Time:
				vals[i] = x.UTC().Format(time.RFC3339)
			}
		}
		res.Rows = append(res.Rows, vals)
	}
	if err := rows.Err(); err != nil {
		return queryResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return queryResult{}, err
	}
	res.RowCount = len(res.Rows)
	return res, nil
}

// setAuthorizer installs fn (nil removes it) on conn's physical SQLite connection. A failure to
// remove one marks the connection bad so the pool closes it instead of reusing it.
func setAuthorizer(conn *sql.Conn, fn sqlite.AuthorizerFn) error {
	return conn.Raw(func(dc any) error {
		r, ok := dc.(sqlite.AuthorizerRegisterer)
		if !ok {
			return errors.New("sqlite driver does not support an authorizer")
		}
		if err := r.RegisterAuthorizer(fn); err != nil {
			if fn == nil {
				return errors.Join(err, driver.ErrBadConn)
			}
			return err
		}
		return nil
	})
}

// actionName says in words what a denied authorizer action would have done.
func actionName(a sqlite.AuthorizerActionCode) string {
	switch a {
	case sqlite.AuthInsert:
		return "insert rows"
	case sqlite.AuthUpdate:
		return "update rows"
	case sqlite.AuthDelete:
		return "delete rows"
	case sqlite.AuthPragma:
		return "run a PRAGMA"
	case sqlite.AuthAttach, sqlite.AuthDetach:
		return "attach or detach a database"
	case sqlite.AuthTransaction, sqlite.AuthSavepoint:
		return "control a transaction"
	case sqlite.AuthAlterTable, sqlite.AuthAnalyze, sqlite.AuthReindex:
		return "change the schema"
	default:
		return "create or drop a schema object"
	}
}
