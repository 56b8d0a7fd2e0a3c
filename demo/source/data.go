package source

import (
	"embed"
	"fmt"
	"io/fs"

	"go.yaml.in/yaml/v3"
)

// embedded is the dataset committed under data/: schema.yaml, catalog.yaml and one CSV per table.
// The CSVs are written by internal/gen from a seeded PRNG.
//
//go:generate go run ./internal/gen -out data
//go:embed data/schema.yaml data/catalog.yaml data/*.csv
var embedded embed.FS

// Table describes one table of the demo database, as list_tables and describe_table report it.
type Table struct {
	Name        string   `yaml:"name" json:"name"`
	Description string   `yaml:"description" json:"description"`
	Columns     []Column `yaml:"columns" json:"-"`
}

// Column describes one column. Type is the SQLite declaration used to create it.
type Column struct {
	Name        string `yaml:"name" json:"name"`
	Type        string `yaml:"type" json:"type"`
	Description string `yaml:"description" json:"description"`
}

// Term is one glossary entry of the catalog.
type Term struct {
	Term       string   `yaml:"term"`
	Kind       string   `yaml:"kind"`
	Source     string   `yaml:"source"`
	Definition string   `yaml:"definition"`
	Caveats    []string `yaml:"caveats"`
	Tables     []string `yaml:"tables"`
	Synonyms   []string `yaml:"synonyms"`
}

// dataset is everything the source is seeded from.
type dataset struct {
	files  fs.FS
	tables []Table
	terms  []Term
}

// loadDataset reads schema.yaml and catalog.yaml from fsys (rooted at the data folder) and checks
// that every table has its CSV and every term names only known tables.
func loadDataset(fsys fs.FS) (*dataset, error) {
	var schema struct {
		Tables []Table `yaml:"tables"`
	}
	if err := readYAML(fsys, "schema.yaml", &schema); err != nil {
		return nil, err
	}
	var catalog struct {
		Terms []Term `yaml:"terms"`
	}
	if err := readYAML(fsys, "catalog.yaml", &catalog); err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, t := range schema.Tables {
		if t.Name == "" || len(t.Columns) == 0 {
			return nil, fmt.Errorf("schema.yaml: table %q has no name or no columns", t.Name)
		}
		if _, err := fs.Stat(fsys, t.Name+".csv"); err != nil {
			return nil, fmt.Errorf("schema.yaml: table %q: %w", t.Name, err)
		}
		known[t.Name] = true
	}
	for i, term := range catalog.Terms {
		if term.Term == "" || term.Definition == "" || term.Source == "" {
			return nil, fmt.Errorf("catalog.yaml: entry %d needs term, definition and source", i)
		}
		if term.Kind == "" {
			catalog.Terms[i].Kind = "glossary_term"
		}
		for _, tb := range term.Tables {
			if !known[tb] {
				return nil, fmt.Errorf("catalog.yaml: term %q names unknown table %q", term.Term, tb)
			}
		}
	}
	return &dataset{files: fsys, tables: schema.Tables, terms: catalog.Terms}, nil
}

func readYAML(fsys fs.FS, name string, v any) error {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// embeddedData is the committed dataset, rooted at data/.
func embeddedData() (fs.FS, error) { return fs.Sub(embedded, "data") }
