package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	dir := t.TempDir()
	report := `{"machine":{"date":"2026-11-29T21:00:00Z","go_version":"go1.26"},"time_to_ticket":[{"concurrency":64,"ours":{"p50_ms":2},"bare":{"p50_ms":1},"ratio_p50":2,"ratio_p50_spread":{"median":2,"min":1.9,"max":2.1,"rounds":7}}],"redis":{"server":"7.0.15","time_to_ticket":[{"concurrency":64,"ours":{"p50_ms":9},"bare":{"p50_ms":1},"ratio_p50":9,"ratio_p50_spread":{"median":9,"min":8,"max":9.5,"rounds":7}}]},"targets":[{"name":"time to ticket","goal":"g","measured":"m","met":false}]}`
	if err := os.WriteFile(filepath.Join(dir, "report.json"), []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	// An argument is refused before anything is done (it was ignored: "-redis false" ran Redis).
	if err := run(t.Context(), []string{"-render", "-out", dir, "false"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), `unexpected argument "false"`) {
		t.Errorf("run -render -out dir false: %v, want the argument refused", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "REPORT.md")); err == nil {
		t.Fatal("run -render with an argument rendered REPORT.md")
	}
	if err := run(t.Context(), []string{"-render", "-out", dir}, &out, &errOut); err != nil {
		t.Fatalf("run -render: %v (%s)", err, errOut.String())
	}
	md, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| time to ticket | g | m | **not met** |", "| memory | 64 | 2.000 ms | 1.000 ms | 2.00× (1.90–2.10×, 7 rounds) |", "| redis | 64 | 9.000 ms | 1.000 ms | 9.00× (8.00–9.50×, 7 rounds) |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("REPORT.md lacks %q", want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-no-such-flag"},
		{"serve", "-mode", "no-such-mode"},
		{"serve", "-mode", "stack", "-store", "redis://127.0.0.1:1/0"}, // a store is for the synthetic mode
		{"serve", "-store", "redis://127.0.0.1:1/0"},                   // no Redis there
		{"-render", "-out", t.TempDir()},                               // no report.json to render from
		{"-redis-nice", "-21"},                                         // not a nice value
		{"-redis-nice", "20"},
	} {
		var out, errOut bytes.Buffer
		if err := run(t.Context(), args, &out, &errOut); err == nil {
			t.Errorf("run %q succeeded, want an error", args)
		}
	}
}
