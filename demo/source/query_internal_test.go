package source

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestQueryTimeLimitCoversTheWaitForAConnection: the time limit bounds the whole call, its wait
// for one of the read pool's connections included. Until 2026-12-06 it started once a
// connection was had, so with every connection held by slow queries (eight of bob's "WITH
// RECURSIVE …" at once on the four of the pool) a call took twice the limit, and a flood of them
// held everyone's calls, alice's "SELECT 1" among them, for as long as it lasted.
func TestQueryTimeLimitCoversTheWaitForAConnection(t *testing.T) {
	fsys, err := embeddedData()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := loadDataset(fsys)
	if err != nil {
		t.Fatal(err)
	}
	db, err := openDatabase(t.Context(), ds, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := newQuerier(db.read, ds.tables, policy{}, 10, MaxResultBytes, 50*time.Millisecond)

	held, err := db.read.Conn(t.Context()) // the pool's only connection, as a slow query holds it
	if err != nil {
		t.Fatal(err)
	}
	// A backstop, so that a wait the limit does not bound fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = q.run(ctx, identity{oid: "alice"}, "SELECT 1")
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "busy") || !strings.Contains(err.Error(), "50ms") {
		t.Errorf("with no connection free: %v (backstop: %v), want a busy error naming the limit", err, ctx.Err())
	}
	held.Close()
	if res, err := q.run(t.Context(), identity{oid: "alice"}, "SELECT 1"); err != nil || res.RowCount != 1 {
		t.Errorf("with the connection free again: %+v, %v", res, err)
	}
}
