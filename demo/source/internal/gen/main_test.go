package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCommittedDataIsGenerated: the CSVs under demo/source/data are exactly what this generator
// writes, so the dataset can be reviewed as code and regenerated rather than edited by hand.
func TestCommittedDataIsGenerated(t *testing.T) {
	dir := t.TempDir()
	if err := run(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"teams.csv", "services.csv", "incidents.csv", "deployments.csv", "oncall_pay.csv"} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("..", "..", "data", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output; run: go run ./demo/source/internal/gen -out demo/source/data", name)
		}
	}
}
