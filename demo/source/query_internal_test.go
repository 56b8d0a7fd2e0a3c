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
	q := newQuerier(db.read, ds.tables, policy{}, 10, MaxResultBytes, 0, 50*time.Millisecond)

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

// TestOneIdentityHoldsAtMostItsShare: an identity runs at most MaxQueriesPerIdentity queries at
// once, so its slow queries leave the others connections. Until 2026-12-06 nothing held one
// identity to a share: four slow queries of bob's took the pool's four connections, and alice's
// SELECT 1 waited out the time limit and failed "busy" for as long as bob sent them.
func TestOneIdentityHoldsAtMostItsShare(t *testing.T) {
	fsys, err := embeddedData()
	if err != nil {
		t.Fatal(err)
	}
	ds, err := loadDataset(fsys)
	if err != nil {
		t.Fatal(err)
	}
	db, err := openDatabase(t.Context(), ds, DefaultReadConns)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := newQuerier(db.read, ds.tables, policy{}, 10, MaxResultBytes, MaxQueriesPerIdentity, 50*time.Millisecond)
	bob, alice := identity{oid: "bob"}, identity{oid: "alice"}

	// bob's slow queries, running: each holds one of his shares and one connection.
	var releases []func()
	for range MaxQueriesPerIdentity {
		release, ok := q.shares.acquire(t.Context(), bob)
		if !ok {
			t.Fatal("bob's first queries found no share")
		}
		conn, err := db.read.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, func() { conn.Close(); release() })
	}
	// A backstop, so that a wait the limit does not bound fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := q.run(ctx, bob, "SELECT 1"); err == nil || !strings.Contains(err.Error(), "your identity already has 2 queries running") {
		t.Errorf("bob's third query at once: %v, want busy with his share", err)
	}
	if res, err := q.run(ctx, alice, "SELECT 1"); err != nil || res.RowCount != 1 {
		t.Errorf("alice's query beside bob's: %+v, %v", res, err)
	}
	// The same oid of another tenant has a share of its own.
	if res, err := q.run(ctx, identity{tenant: `iss tid="T1"`, oid: "bob"}, "SELECT 1"); err != nil || res.RowCount != 1 {
		t.Errorf("bob of tid T1 beside bob's: %+v, %v", res, err)
	}
	for _, r := range releases {
		r()
	}
	if res, err := q.run(ctx, bob, "SELECT 1"); err != nil || res.RowCount != 1 {
		t.Errorf("bob's query once his ended: %+v, %v", res, err)
	}
	q.shares.mu.Lock()
	defer q.shares.mu.Unlock()
	if len(q.shares.held) != 0 {
		t.Errorf("shares held with no query running: %v", q.shares.held)
	}
}
