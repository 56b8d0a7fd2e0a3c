package config_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/das-ask/ask/config"
)

// readsEnv are the functions that read the process environment.
var readsEnv = map[string]map[string]bool{
	"os":      {"Getenv": true, "LookupEnv": true, "Environ": true, "ExpandEnv": true},
	"syscall": {"Getenv": true, "Environ": true},
}

// envReads lists where src, one Go file, reads the environment: a use of os.Getenv,
// os.LookupEnv, os.Environ or os.ExpandEnv (or syscall's), under whatever name the file
// imports the package as.
func envReads(t *testing.T, fset *token.FileSet, name string, src []byte) []string {
	t.Helper()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	local := map[string]string{} // the name a file uses → the package it imports
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if readsEnv[path] == nil {
			continue
		}
		n := path
		if imp.Name != nil {
			n = imp.Name.Name
		}
		local[n] = path
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && readsEnv[local[id.Name]][sel.Sel.Name] {
			found = append(found, fset.Position(sel.Pos()).String()+": "+local[id.Name]+"."+sel.Sel.Name)
		}
		return true
	})
	return found
}

// TestOnlyConfigReadsTheEnvironment walks the module: no Go file outside package config reads
// the process environment (tests may: they set up the processes they start). Every command
// takes its settings through config.Process and a section's FromEnv. examples/ is left out:
// each example is a standalone program written to be copied, importing nothing of the module.
func TestOnlyConfigReadsTheEnvironment(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root: %v", err)
	}
	fset := token.NewFileSet()
	files := 0
	var found []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch base := d.Name(); {
			case rel == "config", rel == "examples", base == "testdata", base == "node_modules", base == "vendor",
				rel != "." && strings.HasPrefix(base, "."):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		found = append(found, envReads(t, fset, rel, src)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files under %s: not the module", files, root)
	}
	for _, f := range found {
		t.Errorf("%s reads the environment: take it from package config (config.Process and a FromEnv)", f)
	}
}

// The walk's check finds a read under any import name, and nothing else.
func TestEnvReadsFindsReads(t *testing.T) {
	fset := token.NewFileSet()
	src := `package p
import (
	o "os"
	"syscall"
	"strings"
)
func f(get func(string) string) {
	_ = o.Getenv("A")
	_, _ = o.LookupEnv("B")
	_ = syscall.Environ()
	_ = strings.ToUpper("os.Getenv")
	_ = get("C")
}`
	got := envReads(t, fset, "p.go", []byte(src))
	want := []string{"p.go:8:6: os.Getenv", "p.go:9:9: os.LookupEnv", "p.go:10:6: syscall.Environ"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("envReads = %q, want %q", got, want)
	}
}

// TestReadmeNamesEveryVariable: every variable a reader of package config asks for is in the
// README's Configuration section, so an operator finds each setting there.
func TestReadmeNamesEveryVariable(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	asked := map[string]bool{}
	lookup := func(k string) (string, bool) { asked[k] = true; return "", false }
	_, _ = config.FromEnv(lookup)
	_, _ = config.ClientFromEnv(lookup)
	_, _ = config.ConformanceFromEnv(lookup)
	_, _ = config.TargetFromEnv(lookup)
	_, _ = config.EvalFromEnv(lookup)
	_, _ = config.StubFromEnv(lookup)
	_, _ = config.DemoSourceFromEnv(lookup)
	_, _ = config.DevIdPTokenFromEnv(lookup)
	// The provider keys are read only when a real model is asked for.
	_, _ = config.FromEnv(func(k string) (string, bool) {
		asked[k] = true
		return "real", k == "ASK_LLM"
	})
	for _, k := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY"} {
		if !asked[k] {
			t.Errorf("%s was not asked for with ASK_LLM=real: the recording lookup misses reads", k)
		}
	}
	if len(asked) < 40 {
		t.Fatalf("the readers asked for %d variables: the recording lookup is not the one read", len(asked))
	}
	for k := range asked {
		if !strings.Contains(string(readme), "`"+k+"`") {
			t.Errorf("README.md does not name %s", k)
		}
	}
}
