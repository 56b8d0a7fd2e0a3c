package source

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

// database is the demo data: an in-memory SQLite database shared by two pools. The seed pool
// (one connection, kept open for the database's lifetime) created and filled it; the read pool
// is what queries run on, and every one of its connections has `query_only` set.
type database struct {
	seed *sql.DB
	read *sql.DB
}

// openDatabase creates a fresh, uniquely named in-memory database, creates ds's tables and loads
// their CSVs. Each Source gets its own database, so tests can run many side by side.
func openDatabase(ctx context.Context, ds *dataset, readConns int) (*database, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	name := "file:demo-" + hex.EncodeToString(b[:]) + "?mode=memory&cache=shared"
	seed, err := sql.Open("sqlite", name)
	if err != nil {
		return nil, err
	}
	seed.SetMaxOpenConns(1)
	seed.SetConnMaxLifetime(0)
	seed.SetMaxIdleConns(1)
	if err := load(ctx, seed, ds); err != nil {
		seed.Close()
		return nil, err
	}
	read, err := sql.Open("sqlite", name+"&_pragma=query_only(1)")
	if err != nil {
		seed.Close()
		return nil, err
	}
	read.SetMaxOpenConns(readConns)
	read.SetMaxIdleConns(readConns)
	if err := read.PingContext(ctx); err != nil {
		read.Close()
		seed.Close()
		return nil, err
	}
	return &database{seed: seed, read: read}, nil
}

// Close closes both pools; the in-memory database goes away with the last connection.
func (d *database) Close() error {
	return errors.Join(d.read.Close(), d.seed.Close())
}

func load(ctx context.Context, db *sql.DB, ds *dataset) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, t := range ds.tables {
		if err := loadTable(ctx, tx, ds, t); err != nil {
			return fmt.Errorf("load %s: %w", t.Name, err)
		}
	}
	return tx.Commit()
}

func loadTable(ctx context.Context, tx *sql.Tx, ds *dataset, t Table) error {
	cols := make([]string, len(t.Columns))
	decls := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cols[i] = quoteIdent(c.Name)
		decls[i] = quoteIdent(c.Name) + " " + c.Type
	}
	if _, err := tx.ExecContext(ctx, "CREATE TABLE "+quoteIdent(t.Name)+" ("+strings.Join(decls, ", ")+")"); err != nil {
		return err
	}
	f, err := ds.files.Open(t.Name + ".csv")
	if err != nil {
		return err
	}
	defer f.Close()
	r := csv.NewReader(f)
	header, err := r.Read()
	if err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if strings.Join(header, ",") != strings.Join(columnNames(t), ",") {
		return fmt.Errorf("CSV header %v does not match schema columns %v", header, columnNames(t))
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ")
	ins, err := tx.PrepareContext(ctx, "INSERT INTO "+quoteIdent(t.Name)+" ("+strings.Join(cols, ", ")+") VALUES ("+marks+")")
	if err != nil {
		return err
	}
	defer ins.Close()
	args := make([]any, len(cols))
	for line := 2; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		for i, v := range rec {
			if v == "" {
				args[i] = nil // an empty field is NULL (e.g. an open incident's resolved_at)
			} else {
				args[i] = v // SQLite's column affinity turns "42" into an INTEGER in an INTEGER column
			}
		}
		if _, err := ins.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
}

func columnNames(t Table) []string {
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	return names
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
