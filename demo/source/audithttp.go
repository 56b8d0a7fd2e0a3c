package source

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/das-ask/ask/demo/idp"
)

// auditHandler serves GET /audit: the retained audit entries as JSON lines, the same lines as
// the file, oldest first, filtered by the optional call_id and oid query parameters. It answers
// only callers on the loopback interface that name a loopback host (403 otherwise): the audit
// log names identities, so it is for the operator on the machine and for the conformance suite,
// not for the network, nor for a web page that DNS rebinding brought to the machine's loopback.
func (s *Source) auditHandler(w http.ResponseWriter, r *http.Request) {
	if !idp.LocalRequest(r) {
		http.Error(w, "the audit log is served to loopback callers only", http.StatusForbidden)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	for _, e := range s.audit.list(q.Get("call_id"), q.Get("oid")) {
		if err := enc.Encode(e); err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(body.Bytes())
}
