package source_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/das-ask/ask/demo/source"
	"github.com/das-ask/ask/internal/logtest"
)

func TestAuditOneLinePerCall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "audit.jsonl")
	now := time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC)
	_, srv := start(t, source.Options{AuditPath: path, Now: func() time.Time { return now }})
	alice, bob := connect(t, srv, "tok-alice"), connect(t, srv, "tok-bob")

	calls := []struct {
		cs                 *mcp.ClientSession
		id, oid, tool, sql string
		status, code       string
	}{
		{alice, "c-1", "alice", "search_catalog", "", "ok", ""},
		{alice, "c-2", "alice", "run_query", "SELECT count(*) FROM incidents", "ok", ""},
		{bob, "c-3", "bob", "run_query", "SELECT * FROM oncall_pay", "refused", "forbidden"},
		{bob, "c-4", "bob", "run_query", "DELETE FROM teams", "refused", "read_only"},
		{bob, "c-5", "bob", "run_query", "SELECT nope FROM teams", "error", ""},
		{bob, "c-6", "bob", "define_term", "", "ok", ""},
	}
	for _, c := range calls {
		args := map[string]any{"sql": c.sql}
		switch c.tool {
		case "search_catalog":
			args = map[string]any{"query": "MTTR"}
		case "define_term":
			args = map[string]any{"term": "incident"}
		}
		call(t, c.cs, c.id, c.tool, args)
	}

	// The file: exactly one line per call, in order, each with the caller's call id.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != len(calls) {
		t.Fatalf("audit file has %d lines, want %d", len(lines), len(calls))
	}
	for i, c := range calls {
		l := lines[i]
		for _, k := range []string{"ts", "call_id", "oid", "tool", "ms", "refused", "status"} {
			if _, ok := l[k]; !ok {
				t.Errorf("line %d lacks %q: %v", i, k, l)
			}
		}
		if l["call_id"] != c.id || l["oid"] != c.oid || l["tool"] != c.tool || l["status"] != c.status ||
			l["refused"] != (c.status == "refused") || str(l["code"]) != c.code || l["ts"] != "2026-11-29T21:00:00Z" {
			t.Errorf("line %d = %v, want call %+v", i, l, c)
		}
		if c.sql != "" && l["sql"] != c.sql {
			t.Errorf("line %d sql = %v, want %q", i, l["sql"], c.sql)
		}
	}

	// The endpoint: the same entries, filterable by call id and identity.
	for _, c := range calls {
		got := auditEntries(t, srv, "call_id="+c.id)
		if len(got) != 1 || got[0].OID != c.oid || got[0].Tool != c.tool || got[0].Status != c.status {
			t.Errorf("GET /audit?call_id=%s = %+v", c.id, got)
		}
	}
	if got := auditEntries(t, srv, "oid=bob"); len(got) != 4 {
		t.Errorf("GET /audit?oid=bob: %d entries, want 4", len(got))
	}
	if got := auditEntries(t, srv, ""); len(got) != len(calls) {
		t.Errorf("GET /audit: %d entries, want %d", len(got), len(calls))
	}
}

func TestAuditCallIDFromHeader(t *testing.T) {
	_, srv := start(t, source.Options{})
	cs := connect(t, srv, "tok-alice")
	// No _meta: the Ask-Call-Id header alone names the call.
	if _, err := cs.CallTool(withCallID(t.Context(), "hdr-7"), &mcp.CallToolParams{Name: "list_tables", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if got := auditEntries(t, srv, "call_id=hdr-7"); len(got) != 1 || got[0].Tool != "list_tables" {
		t.Errorf("GET /audit?call_id=hdr-7 = %+v", got)
	}
}

func TestAuditEndpointLoopbackOnly(t *testing.T) {
	src, _ := start(t, source.Options{})
	for addr, want := range map[string]int{
		"127.0.0.1:5000": http.StatusOK,
		"[::1]:5000":     http.StatusOK,
		"10.1.2.3:5000":  http.StatusForbidden,
		"192.0.2.9:80":   http.StatusForbidden,
	} {
		r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8091/audit", nil)
		r.RemoteAddr = addr
		r.Header.Set("X-Forwarded-For", "127.0.0.1")
		w := httptest.NewRecorder()
		src.Handler().ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("from %s: %d, want %d", addr, w.Code, want)
		}
	}
}

// TestAuditEndpointRefusesOtherHosts: a loopback caller naming a host that is not a loopback
// one is refused, for that is what a page in a browser on the machine sends after DNS
// rebinding (evil.example resolved to 127.0.0.1), which could then read the log of every
// identity's calls as its own origin's. Until 2026-12-06 GET /audit answered it; /mcp refused
// it already (the MCP SDK's DNS rebinding protection).
func TestAuditEndpointRefusesOtherHosts(t *testing.T) {
	src, _ := start(t, source.Options{})
	for host, want := range map[string]int{
		"127.0.0.1:8091":      http.StatusOK,
		"localhost:8091":      http.StatusOK,
		"LOCALHOST":           http.StatusOK,
		"[::1]:8091":          http.StatusOK,
		"127.0.0.2":           http.StatusOK,
		"evil.example:8091":   http.StatusForbidden,
		"evil.example":        http.StatusForbidden,
		"localhost.evil.test": http.StatusForbidden,
		"127.0.0.1.nip.io":    http.StatusForbidden,
		"10.0.0.1:8091":       http.StatusForbidden,
		"":                    http.StatusForbidden,
	} {
		r := httptest.NewRequest(http.MethodGet, "/audit", nil)
		r.Host = host
		r.RemoteAddr = "127.0.0.1:5000"
		w := httptest.NewRecorder()
		src.Handler().ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Host %q: %d, want %d", host, w.Code, want)
		}
	}
}

func TestAuditConcurrentCalls(t *testing.T) {
	_, srv := start(t, source.Options{})
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		go func() {
			cs, err := dial(t.Context(), srv, "tok-alice")
			if err != nil {
				errs <- err
				return
			}
			defer cs.Close()
			id := fmt.Sprintf("par-%d", i)
			_, err = cs.CallTool(withCallID(t.Context(), id), &mcp.CallToolParams{
				Meta: mcp.Meta{"ask/call_id": id}, Name: "run_query",
				Arguments: map[string]any{"sql": "SELECT count(*) FROM deployments WHERE status = 'failed'"},
			})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		if got := auditEntries(t, srv, fmt.Sprintf("call_id=par-%d", i)); len(got) != 1 {
			t.Errorf("par-%d: %d audit entries, want 1", i, len(got))
		}
	}
}

// TestAuditLineIsBounded: an audit line (and the log line of the call) holds at most the first 16 KiB of a statement and 256
// bytes of a call id, whatever the call sent. The body of one MCP request may be 4 MiB, and
// until 2026-12-06 each line kept all of its SQL and call id, in the file and in the 10,000
// entries kept in memory: 100 calls of 4 MiB statements took the source from 93 MB to 892 MB
// of memory, and 10,000 would have held 40 GB. A statement over 16 KiB is not run either (a
// tool error, so that every statement that ran is in the audit whole).
func TestAuditLineIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	var logs logtest.Buffer
	_, srv := start(t, source.Options{AuditPath: path, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	cs := connect(t, srv, "tok-bob")
	longID := strings.Repeat("i", 10<<10)
	long := "SELECT count(*) FROM teams -- " + strings.Repeat("é", 1<<19)
	res := call(t, cs, longID, "run_query", map[string]any{"sql": long})
	if !res.IsError || refusal(res) != "" || !strings.Contains(text(res), "16384") {
		t.Errorf("a 1 MiB statement: isError=%v refusal=%q %.200q, want a tool error naming the limit", res.IsError, refusal(res), text(res))
	}
	fitting := "SELECT count(*) FROM teams -- " + strings.Repeat("x", source.MaxSQLBytes-30)
	var out queryOut
	structured(t, call(t, cs, "fits", "run_query", map[string]any{"sql": fitting}), &out)

	got := auditEntries(t, srv, "oid=bob")
	if len(got) != 2 {
		t.Fatalf("%d audit entries, want 2", len(got))
	}
	if e := got[0]; len(e.SQL) > source.MaxSQLBytes+len("…") || !strings.HasPrefix(long, strings.TrimSuffix(e.SQL, "…")) ||
		!utf8.ValidString(e.SQL) || len(e.CallID) > 256+len("…") || !strings.HasPrefix(longID, strings.TrimSuffix(e.CallID, "…")) || e.Status != source.StatusError {
		t.Errorf("the long call's line: sql %d bytes, call_id %d bytes, status %s", len(e.SQL), len(e.CallID), e.Status)
	}
	if e := got[1]; e.SQL != fitting || e.CallID != "fits" || e.Status != source.StatusOK {
		t.Errorf("a statement of %d bytes: line holds %d bytes of it, status %s", len(fitting), len(e.SQL), e.Status)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() > 40<<10 {
		t.Errorf("audit file: %v, %v bytes, want under 40 KiB", err, fi.Size())
	}
	for _, l := range strings.Split(logs.String(), "\n") {
		if len(l) > 1<<10 {
			t.Errorf("a log line of %d bytes: %.100s…", len(l), l)
		}
	}
}

// TestAuditUnknownTool: a call naming a tool the source does not serve is a tool call too, and
// leaves its audit line (status error), though the SDK answers it with a JSON-RPC error before
// any tool runs: until 2026-12-06 it left none, so a caller probing for tools left no trace.
func TestAuditUnknownTool(t *testing.T) {
	_, srv := start(t, source.Options{Serves: source.PartCatalog})
	cs := connect(t, srv, "tok-bob")
	for id, name := range map[string]string{"u-1": "run_query", "u-2": "drop_everything", "u-3": strings.Repeat("n", 10<<10)} {
		if _, err := cs.CallTool(withCallID(t.Context(), id), &mcp.CallToolParams{
			Meta: mcp.Meta{"ask/call_id": id}, Name: name, Arguments: map[string]any{"sql": "SELECT 1"},
		}); err == nil {
			t.Errorf("%s: calling %.20q succeeded", id, name)
		}
		got := auditEntries(t, srv, "call_id="+id)
		if len(got) != 1 || got[0].OID != "bob" || got[0].Status != source.StatusError || got[0].Refused ||
			!strings.HasPrefix(name, strings.TrimSuffix(got[0].Tool, "…")) || len(got[0].Tool) > 256+len("…") {
			t.Errorf("%s: audit %+.300v, want one error line for bob naming the tool", id, got)
		}
	}
	call(t, cs, "k-1", "search_catalog", map[string]any{"query": "MTTR"})
	if got := auditEntries(t, srv, "call_id=k-1"); len(got) != 1 {
		t.Errorf("a served tool: %d audit lines, want 1", len(got))
	}
}
