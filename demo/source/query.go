package source

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
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

// MaxResultBytes bounds a run_query result: its rows, as JSON, hold at most this many bytes
// (the result says truncated when the bound cut it, as for the row cap). The result travels
// twice in one response (structured, and as text), and the service reads at most 4 MiB of it.
const MaxResultBytes = 1 << 20

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
	db     *sql.DB
	policy policy
	// tables are the dataset's tables, lower-cased: the only tables of the database a query
	// reads, beside the schema's and the JSON functions' (readableBuiltin).
	tables map[string]bool
	rowCap int
	// maxBytes bounds a result's rows as JSON (MaxResultBytes for run_query).
	maxBytes int
	timeout  time.Duration
	// shares holds each identity to its share of the read connections.
	shares *shares
}

// newQuerier runs queries on db over the dataset's tables, at most perIdentity at once for each
// identity (0: no limit).
func newQuerier(db *sql.DB, tables []Table, p policy, rowCap, maxBytes, perIdentity int, timeout time.Duration) *querier {
	names := make(map[string]bool, len(tables))
	for _, t := range tables {
		names[strings.ToLower(t.Name)] = true
	}
	return &querier{db: db, policy: p, tables: names, rowCap: rowCap, maxBytes: maxBytes, timeout: timeout,
		shares: newShares(perIdentity)}
}

// readableBuiltin reports the tables SQLite itself provides that a query may read: the schema
// (public, as describe_table is) and the JSON table-valued functions, which read only their
// arguments. Every other one is refused, for SQLite's virtual tables see past any policy:
// sqlite_dbpage returns the database's raw pages, the restricted tables' rows among them, and
// dbstat the size of every table.
func readableBuiltin(table string) bool {
	switch strings.ToLower(table) {
	case "sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema", "json_each", "json_tree":
		return true
	}
	return false
}

// mayRead reports whether who may read column of table, as the authorizer is asked: one of the
// dataset's tables its policy allows, or one of readableBuiltin. A refusal says which.
//
// An empty column is SQLite's read of a FROM item none of whose values the statement uses
// (count(*)), named as the statement spells it: a table, but as often a CTE's or a
// subquery's name, which no list holds. Such a read extracts no value, so any name is let
// through but a restricted table and SQLite's own tables.
func (q *querier) mayRead(who identity, table, column string) *refusalError {
	name := strings.ToLower(table)
	switch {
	case readableBuiltin(name):
		return nil
	case !q.tables[name] && (column != "" || strings.HasPrefix(name, "sqlite_") || name == "dbstat"):
		return &refusalError{CodeForbidden, "table " + name + " is not one of this source's tables; no identity may read it"}
	case !q.policy.mayRead(who, name):
		return &refusalError{CodeForbidden, "identity " + who.oid + " may not read table " + name}
	}
	return nil
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

// run executes one SELECT for who. It returns a *refusalError when policy forbids the statement
// (any write, attachment or pragma; more than one statement; a restricted table for this identity)
// and an ordinary error for anything the caller can correct (bad SQL, the time limit).
//
// Three independent gates keep the database read-only: the lexical check (one statement,
// starting with SELECT or WITH), an authorizer installed on the connection for this statement
// that allows nothing but reads, selects, recursive CTEs and harmless functions, and the
// connection's query_only pragma. The authorizer also sees every table the statement reads —
// through joins, subqueries, CTEs and views alike — which is how restricted tables are found,
// and SQLite's own virtual tables (sqlite_dbpage, dbstat) are refused.
func (q *querier) run(ctx context.Context, who identity, query string) (queryResult, error) {
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

	// The limit bounds the whole call: a wait for a connection, which slow queries of anyone's
	// may hold, counts.
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	// An identity's own share first, so that its queries never hold more than their share of the
	// connections, however many it sends.
	release, ok := q.shares.acquire(ctx, who)
	if !ok {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return queryResult{}, fmt.Errorf("the source is busy: your identity already has %d queries running, the most one identity may run at once, and none ended within the %s limit; try again", q.shares.n, q.timeout)
		}
		return queryResult{}, ctx.Err()
	}
	defer release()
	conn, err := q.db.Conn(ctx)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return queryResult{}, fmt.Errorf("the source is busy: no connection was free within the %s limit; try again", q.timeout)
		}
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
			if r := q.mayRead(who, arg1, arg2); r != nil {
				return deny(r)
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

// collect reads at most rowCap rows of query's result, and rows of at most maxBytes as JSON; one
// more row marks the result truncated. A first row larger than maxBytes is an error.
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
	size := len("[]")
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
		b, err := json.Marshal(vals)
		if err != nil {
			return queryResult{}, err
		}
		if size += len(b) + len(","); size > q.maxBytes {
			if len(res.Rows) == 0 {
				return queryResult{}, fmt.Errorf("one row is %d bytes as JSON, more than the %d bytes a result may hold: select fewer or shorter values", len(b), q.maxBytes)
			}
			res.Truncated = true
			break
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
