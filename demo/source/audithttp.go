package source

import (
	"encoding/json"
	"net"
	"net/http"
)

// auditHandler serves GET /audit: the retained audit entries as {"entries": [...]}, oldest
// first, filtered by the optional call_id and oid query parameters. It answers only callers on
// the loopback interface (403 otherwise): the audit log names identities, so it is for the
// operator on the machine and for the conformance suite, not for the network.
func (s *Source) auditHandler(w http.ResponseWriter, r *http.Request) {
	if !fromLoopback(r) {
		http.Error(w, "the audit log is served to loopback callers only", http.StatusForbidden)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	body, err := json.Marshal(struct {
		Entries []AuditEntry `json:"entries"`
	}{s.audit.list(q.Get("call_id"), q.Get("oid"))})
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(append(body, '\n'))
}

// fromLoopback reports whether the request's peer address is a loopback address. Forwarding
// headers are ignored: they are whatever the caller says.
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
