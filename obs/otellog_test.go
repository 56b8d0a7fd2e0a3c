package obs_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/internal/loopback"
	"github.com/das-ask/ask/obs"
)

// lineWriter hands each line written to it to a channel.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	select {
	case w <- string(p):
	default: // the test has what it needs
	}
	return len(p), nil
}

// tracingLogged sets tracing up as the environment says, the SDK's own lines going to a JSON
// logger that hands each line to the channel it returns; both are undone at the test's end.
func tracingLogged(t *testing.T) (lineWriter, *obs.Tracing) {
	t.Helper()
	lines := make(lineWriter, 16)
	obs.LogLibrary(slog.New(slog.NewJSONHandler(lines, nil)))
	t.Cleanup(func() { obs.LogLibrary(slog.New(slog.DiscardHandler)) })
	tr, err := obs.NewTracing(t.Context(), obs.TracingOptions{OTLP: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// t.Context is done by now; Shutdown gives up on a dead collector within its timeout.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	return lines, tr
}

// sdkLines sets tracing up (tracingLogged) and hands back each line the SDK logged meanwhile,
// with its record (not a JSON record: the test fails).
func sdkLines(t *testing.T) map[string]map[string]any {
	t.Helper()
	lines, _ := tracingLogged(t)
	out := map[string]map[string]any{}
	for len(lines) > 0 {
		line := <-lines
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON record: %q", line)
		}
		out[line] = rec
	}
	return out
}

// TestExportErrorsAreRecords: with the collector down, the SDK's export errors reach the
// service's logger as JSON records, not plain text on stderr beside them. Found by an
// operator's audit: askd with OTEL_EXPORTER_OTLP_ENDPOINT at a dead collector wrote
// "2026/12/05 01:44:41 traces export: Post …: connection refused" into its JSON log stream.
func TestExportErrorsAreRecords(t *testing.T) {
	dead := loopback.Refused(t) // nothing listens there: every export is refused
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+dead)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "200")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "1")

	lines, tr := tracingLogged(t)
	_, span := tr.Provider.Tracer("t").Start(t.Context(), "ask")
	span.End()

	select {
	case line := <-lines:
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON record: %q", line)
		}
		if rec["level"] != "WARN" || rec["msg"] != "opentelemetry" || !strings.Contains(rec["err"].(string), dead) {
			t.Errorf("the export error logged as %s", line)
		}
	case <-time.After(30 * time.Second): // a bound for the failure only: it comes in milliseconds
		t.Fatal("the export error never reached the logger")
	}
}

// TestSDKLinesAreRecords: what the SDK logs of its own (a setting it cannot read, then ignores)
// reaches the service's logger as a JSON record too. Found by an operator's audit: askd with
// OTEL_EXPORTER_OTLP_TIMEOUT=x wrote `internal_logging.go:50: "msg"="parse duration" …` as plain
// text into its JSON log stream.
func TestSDKLinesAreRecords(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "x")
	// A header without "=": the SDK names the part it could not read, here a credential.
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=ask,api-key:SECRETCOLLECTORKEY")
	msgs := map[string]bool{}
	for line, rec := range sdkLines(t) {
		if rec["level"] != "ERROR" || strings.Contains(line, "SECRETCOLLECTORKEY") {
			t.Errorf("the SDK's line logged as %s", line)
		}
		msgs[rec["msg"].(string)] = true
	}
	if !msgs["parse duration"] || !msgs["parse headers"] {
		t.Errorf("the SDK's lines never reached the logger (%v)", msgs)
	}
}

// TestSDKLinesNeverEchoAHeader: the SDK's lines on OTEL_EXPORTER_OTLP_HEADERS name the part
// they could not read under other attributes than input too: "key" for a name that is not one
// (a credential written with ':' and base64's '=' padding, "authorization:Bearer abc==", is
// cut at the '=' and named whole) and "value" for a value whose percent-escape is malformed.
// Neither reaches the log.
func TestSDKLinesNeverEchoAHeader(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization:Bearer SECRETKEYONE==,api-key=SECRET%zzKEYTWO")
	msgs := map[string]bool{}
	for line, rec := range sdkLines(t) {
		if strings.Contains(line, "SECRETKEYONE") || strings.Contains(line, "KEYTWO") {
			t.Errorf("the SDK's line holds the header: %s", line)
		}
		msgs[rec["msg"].(string)] = true
	}
	if !msgs["parse headers"] || !msgs["escape header value"] {
		t.Errorf("the SDK's lines never reached the logger (%v)", msgs)
	}
}

// TestSDKErrorsNeverEchoASetting: the error the SDK logs beside its line ("err") quotes what it
// could not read too: strconv's `parsing "…"` holds an OTEL_EXPORTER_OTLP_TIMEOUT whole, and a
// header value's malformed escape is quoted with the two characters after its '%'. Found by an
// operator's audit: askd with OTEL_EXPORTER_OTLP_TIMEOUT=S3CRETx logged `"err":"strconv.Atoi:
// parsing \"S3CRETx\": invalid syntax"`, where docs/operations.md promises the SDK's words
// without the value. The line keeps what failed (the message, and the error's kind).
func TestSDKErrorsNeverEchoASetting(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "TIMEOUTSECRET")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "api-key=abc%QZsecret")
	errs := map[string]string{}
	for line, rec := range sdkLines(t) {
		if strings.Contains(line, "TIMEOUTSECRET") || strings.Contains(line, "QZ") {
			t.Errorf("the SDK's line holds the setting: %s", line)
		}
		e, _ := rec["err"].(string)
		errs[rec["msg"].(string)] = e
	}
	if errs["parse duration"] == "" || errs["escape header value"] == "" {
		t.Errorf("the SDK's lines, or their errors, never reached the logger (%v)", errs)
	}
}
