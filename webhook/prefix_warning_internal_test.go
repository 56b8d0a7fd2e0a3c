package webhook

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/das-ask/ask/store"
)

// TestAnOpenPrefixIsWarnedOf: an allow-list prefix whose path does not end in a slash admits
// more than the paths under it (https://h.example/ask admits https://h.example/asking/x), so
// the deliverer warns of it when it starts, naming the prefix; one that ends in a slash, or has
// no path, is not warned of.
func TestAnOpenPrefixIsWarnedOf(t *testing.T) {
	allow := []string{"https://h.example/ask", "https://h.example/kept/", "https://g.example", "https://f.example/", "http://127.0.0.1:9/a%2Fb"}
	if err := (Config{Allow: allow}).CheckURL("https://h.example/asking/x"); err != nil {
		t.Fatalf("the premise: https://h.example/ask does not admit /asking/x: %v", err)
	}
	var logs bytes.Buffer
	if _, err := New(Options{Config: Config{Allow: allow, Secrets: []string{testSecret}},
		Outbox: store.NewMemoryOutbox(), Tickets: finished{}, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range bytes.Split(bytes.TrimSpace(logs.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["level"] == "WARN" {
			p, _ := m["prefix"].(string)
			got = append(got, p)
		}
	}
	want := []string{"https://h.example/ask", "http://127.0.0.1:9/a%2Fb"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("warned of %q, want %q:\n%s", got, want, logs.String())
	}
}
