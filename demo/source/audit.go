package source

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// AuditEntry is one line of the audit log: one tool call, whatever its outcome. It never holds
// a token; SQL is recorded because it is what an auditor needs and carries no parameters.
type AuditEntry struct {
	TS time.Time `json:"ts"`
	// CallID is the caller's id for the call (`ask/call_id` in the call's _meta, else the
	// Ask-Call-Id header); empty if the caller sent neither. One over 256 bytes is cut there and
	// ended with "…".
	CallID string `json:"call_id"`
	// Tenant is the tenant of the validated bearer's identity: its issuer, with
	// ` tid="…"` when the token has a `tid` claim (ask.Identity.Tenant).
	Tenant string `json:"tenant"`
	// OID is the identity from the validated bearer, within Tenant.
	OID string `json:"oid"`
	// Tool is the tool's name: for a call naming a tool the source does not serve, the name
	// asked for (its first 256 bytes).
	Tool string `json:"tool"`
	// MS is the call's wall time inside the source, in milliseconds.
	MS      int64 `json:"ms"`
	Refused bool  `json:"refused"`
	// Status is ok, error (a tool error returned to the model) or refused.
	Status string `json:"status"`
	// Code is the refusal code (forbidden, read_only) when Status is refused.
	Code string `json:"code,omitempty"`
	// SQL is the statement run_query was given, its first MaxSQLBytes when it was longer (and
	// so not run), cut at a character boundary and ended with "…".
	SQL string `json:"sql,omitempty"`
	// Rows is how many rows run_query returned.
	Rows *int `json:"rows,omitempty"`
	// TraceID and SpanID are the caller's W3C trace context (the traceparent header of the
	// request that carried the call): the ask's trace, and the caller's span for this tool
	// call. Empty when the caller sent none (or a malformed one).
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
}

// Audit statuses.
const (
	StatusOK      = "ok"
	StatusError   = "error"
	StatusRefused = "refused"
)

// auditLog appends one JSON line per entry to a file (when it has one) and keeps the newest
// entries in memory for the /audit endpoint. It is safe for concurrent use; lines are written
// whole, in the order entries are recorded.
type auditLog struct {
	mu      sync.Mutex
	file    *os.File
	keep    int
	entries []AuditEntry
}

// openAudit opens path for appending (creating it and its folder, private to the user) or, for
// an empty path, keeps entries in memory only.
func openAudit(path string, keep int) (*auditLog, error) {
	a := &auditLog{keep: keep}
	if path == "" {
		return a, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	a.file = f
	return a, nil
}

// record appends e. An error writing the file is returned (the entry is still kept in memory).
func (a *auditLog) record(e AuditEntry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries = append(a.entries, e)
	if len(a.entries) >= 2*a.keep {
		// Trim in batches, so recording stays amortised O(1), and copy, so the dropped entries
		// do not stay reachable through the old backing array.
		a.entries = append([]AuditEntry(nil), a.entries[len(a.entries)-a.keep:]...)
	}
	if a.file == nil {
		return nil
	}
	_, err = a.file.Write(append(line, '\n'))
	return err
}

// list returns the retained entries, oldest first, that match callID and oid (empty = any).
func (a *auditLog) list(callID, oid string) []AuditEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := []AuditEntry{}
	for _, e := range a.entries[max(0, len(a.entries)-a.keep):] {
		if (callID == "" || e.CallID == callID) && (oid == "" || e.OID == oid) {
			out = append(out, e)
		}
	}
	return out
}

func (a *auditLog) close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.file == nil {
		return nil
	}
	err := a.file.Close()
	a.file = nil
	if errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
}
