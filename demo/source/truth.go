package source

import (
	"context"
	"io/fs"
	"time"
)

// Truth is the demo dataset loaded into a database of its own, read-only, outside any MCP
// server: what a tool that needs the ground truth (the eval's expected results) queries. It has
// no identity and no policy beyond read-only: every table can be read. Safe for concurrent use.
type Truth struct {
	db *database
	q  *querier
}

// OpenTruth loads data (nil means the embedded dataset, the one the demo source serves) into a
// fresh in-memory database. ctx bounds the loading only. Close releases it.
func OpenTruth(ctx context.Context, data fs.FS) (*Truth, error) {
	if data == nil {
		d, err := embeddedData()
		if err != nil {
			return nil, err
		}
		data = d
	}
	ds, err := loadDataset(data)
	if err != nil {
		return nil, err
	}
	db, err := openDatabase(ctx, ds, 2)
	if err != nil {
		return nil, err
	}
	// The same gates as run_query (one SELECT, the authorizer, query_only), with no restricted
	// table, and a row cap and a size bound far above anything an answer holds.
	q := newQuerier(db.read, ds.tables, policy{}, 100000, 256<<20, 0, 30*time.Second)
	return &Truth{db: db, q: q}, nil
}

// Query runs one SELECT and returns its columns and rows, values as run_query returns them
// (int64, float64, string or nil).
func (t *Truth) Query(ctx context.Context, sql string) (columns []string, rows [][]any, err error) {
	res, err := t.q.run(ctx, identity{}, sql)
	if err != nil {
		return nil, nil, err
	}
	return res.Columns, res.Rows, nil
}

// Close releases the database.
func (t *Truth) Close() error { return t.db.Close() }
