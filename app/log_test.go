package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/config"
)

// TestLogLinesHaveOneOfEachKey: every line askd logs is a JSON object in which no key appears
// twice. A duplicate ("component":"ask","component":"webhook") is read differently by every
// log pipeline (the first, the last, or an error), so an operator filtering on component
// misses the lines of the part they look for.
func TestLogLinesHaveOneOfEachKey(t *testing.T) {
	cfg := config.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Ops.AdminAddr = ""
	cfg.Ops.LogLevel = slog.LevelDebug
	cfg.Webhooks.Allow = []string{"https://hooks.example/"}
	cfg.Webhooks.Secrets = []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
	var logs bytes.Buffer
	m := app.NewMain(cfg)
	m.Logger = app.NewLogger(cfg.Ops, &logs)
	m.Authenticator = noAuth{}
	m.Runner = ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome { return ask.Outcome{} })
	if err := m.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"msg":"webhook deliverer started"`) {
		t.Fatalf("no webhook deliverer line to check; logs:\n%s", logs.String())
	}
	for line := range strings.Lines(logs.String()) {
		if dup := duplicateKey(t, line); dup != "" {
			t.Errorf("key %q twice in %s", dup, line)
		}
	}
}

// duplicateKey is a key that appears twice in one object of the JSON text line, or "".
func duplicateKey(t *testing.T, line string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	var walk func() string
	walk = func() string {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("not JSON: %v: %s", err, line)
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			dup := ""
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					t.Fatalf("not JSON: %v: %s", err, line)
				}
				key := k.(string)
				if seen[key] && dup == "" {
					dup = key
				}
				seen[key] = true
				if d := walk(); dup == "" {
					dup = d
				}
			}
			_, _ = dec.Token() // '}'
			return dup
		case json.Delim('['):
			dup := ""
			for dec.More() {
				if d := walk(); dup == "" {
					dup = d
				}
			}
			_, _ = dec.Token() // ']'
			return dup
		}
		return ""
	}
	dup := walk()
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("more than one JSON value in %s", line)
	}
	return dup
}
