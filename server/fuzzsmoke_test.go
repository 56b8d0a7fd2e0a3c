package server_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestFuzzSmokeRunsEveryTarget: scripts/fuzz-smoke.sh, which CI runs and make fuzz scales, lists
// every fuzz target of the module (README: "make fuzz | every fuzz target"), each under its own
// package. FuzzAppendJSONString (server) was written and never listed, so neither ran it.
func TestFuzzSmokeRunsEveryTarget(t *testing.T) {
	root := ".."
	script, err := os.ReadFile(filepath.Join(root, "scripts", "fuzz-smoke.sh"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*"(\./\S+)\s+(Fuzz\w+)\s+\d+"$`).FindAllStringSubmatch(string(script), -1) {
		listed[m[1]+" "+m[2]] = true
	}
	decl := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(\w+ \*testing\.F\)`)
	var missing []string
	found := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			found++
			if key := "./" + filepath.ToSlash(rel) + " " + m[1]; !listed[key] {
				missing = append(missing, key)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no fuzz target found in the module")
	}
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("fuzz target %s is not in scripts/fuzz-smoke.sh: neither CI nor make fuzz runs it", m)
	}
}
