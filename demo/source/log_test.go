package source_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/das-ask/ask/demo/source"
	"github.com/das-ask/ask/internal/logtest"
)

// TestLogs: one readable line per tool call naming the identity and call id, none of the SDK's
// per-session chatter, and never the token.
func TestLogs(t *testing.T) {
	var buf logtest.Buffer
	_, srv := start(t, source.Options{Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	cs := connect(t, srv, "tok-bob-secret")
	call(t, cs, "log-1", "run_query", map[string]any{"sql": "SELECT * FROM oncall_pay"})
	cs.Close()

	out := buf.String()
	if !strings.Contains(out, `msg="tool call" tool=run_query call_id=log-1 tenant="" oid=bob-secret status=refused code=forbidden`) {
		t.Errorf("no tool call line in:\n%s", out)
	}
	if strings.Contains(out, "session") {
		t.Errorf("SDK session chatter logged:\n%s", out)
	}
	buf.AssertAbsent(t, "tok-bob-secret")
}
