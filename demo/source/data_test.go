package source_test

import (
	"testing"
	"testing/fstest"

	"github.com/das-ask/ask/demo/source"
)

// TestOwnDataset: a source can be seeded from another folder, and a dataset that contradicts
// itself is rejected at start rather than served.
func TestOwnDataset(t *testing.T) {
	schema := "tables:\n  - name: things\n    description: Things.\n    columns:\n      - {name: id, type: INTEGER PRIMARY KEY, description: Id.}\n      - {name: label, type: TEXT, description: Label.}\n"
	catalog := func(tables string) string {
		return "terms:\n  - term: thing\n    source: Handbook\n    definition: A thing.\n    tables: [" + tables + "]\n"
	}
	good := fstest.MapFS{
		"schema.yaml":  {Data: []byte(schema)},
		"catalog.yaml": {Data: []byte(catalog("things"))},
		"things.csv":   {Data: []byte("id,label\n1,one\n2,\n")},
	}
	_, srv := start(t, source.Options{Data: good})
	var out queryOut
	structured(t, call(t, connect(t, srv, "tok-bob"), "own", "run_query", map[string]any{"sql": "SELECT count(*), count(label) FROM things"}), &out)
	if out.Rows[0][0] != float64(2) || out.Rows[0][1] != float64(1) {
		t.Errorf("rows = %v, want 2 things, one label (an empty field is NULL)", out.Rows)
	}

	for name, fsys := range map[string]fstest.MapFS{
		"unknown table in catalog": {"schema.yaml": good["schema.yaml"], "things.csv": good["things.csv"], "catalog.yaml": {Data: []byte(catalog("nope"))}},
		"missing CSV":              {"schema.yaml": good["schema.yaml"], "catalog.yaml": good["catalog.yaml"]},
		"header mismatch":          {"schema.yaml": good["schema.yaml"], "catalog.yaml": good["catalog.yaml"], "things.csv": {Data: []byte("id,name\n1,x\n")}},
	} {
		_, err := source.New(t.Context(), source.Options{Authenticator: fakeAuth{}, Data: fsys})
		if err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}
