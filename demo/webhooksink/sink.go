// Package webhooksink is the dev stack's loopback webhook receiver: asks made with
// `-webhook <stack>/dev/webhooks/inbox` are delivered here, verified with the stack's own
// secret, logged ("webhook received") and listed at <stack>/dev/webhooks/ so a newcomer can
// watch a delivery arrive. It is demo infrastructure: askd never serves it.
package webhooksink

import (
	"encoding/json"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/das-ask/ask/demo/idp"
)

// keep is how many deliveries the page lists.
const keep = 50

// Entry is one delivery as the sink saw it.
type Entry struct {
	At        time.Time       `json:"at"`
	ID        string          `json:"webhook_id"`
	Verified  bool            `json:"verified"`
	Ticket    string          `json:"ticket,omitempty"`
	Outcome   string          `json:"outcome,omitempty"`
	Terminal  json.RawMessage `json:"terminal,omitempty"`
	Signature string          `json:"webhook_signature"`
}

// Sink receives deliveries at …/inbox and lists them at …/ (HTML) or …/?format=json.
type Sink struct {
	wh  *standardwebhooks.Webhook
	log *slog.Logger

	mu  sync.Mutex
	got []Entry
}

// New returns a sink that verifies with secret (whsec_…); nil log discards.
func New(secret string, log *slog.Logger) (*Sink, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sink{wh: wh, log: log}, nil
}

// Entries returns what arrived, newest last.
func (s *Sink) Entries() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.got...)
}

// ServeHTTP handles POST …/inbox and GET (or HEAD) on anything else; any other request is a
// 405 whose Allow names what the path takes, as RFC 9110 §15.5.6 requires of a 405. The list
// holds every identity's outcomes, which the API shows to their owner alone, so it answers only
// a caller on the loopback interface whose request names a loopback host (403 otherwise), as
// the demo source's /audit does: not the network (a stack listening on another address), nor a
// web page that DNS rebinding brought to loopback.
func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	inbox := strings.HasSuffix(r.URL.Path, "/inbox")
	if r.Method == http.MethodPost && inbox {
		s.receive(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		allow := "GET, HEAD"
		if inbox {
			allow += ", POST"
		}
		w.Header().Set("Allow", allow)
		http.Error(w, "GET the list, or POST to …/inbox", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if !idp.LocalRequest(r) {
		http.Error(w, "the deliveries are listed to loopback callers only", http.StatusForbidden)
		return
	}
	entries := s.Entries()
	if r.URL.Query().Get("format") == "json" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(entries)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = page.Execute(w, entries)
}

func (s *Sink) receive(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	e := Entry{At: time.Now().UTC(), ID: r.Header.Get(standardwebhooks.HeaderWebhookID),
		Signature: r.Header.Get(standardwebhooks.HeaderWebhookSignature)}
	e.Verified = s.wh.Verify(body, r.Header) == nil
	var d struct {
		Ticket   string          `json:"ticket"`
		Terminal json.RawMessage `json:"terminal"`
	}
	if e.Verified && json.Unmarshal(body, &d) == nil {
		var t struct{ Type string }
		_ = json.Unmarshal(d.Terminal, &t)
		e.Ticket, e.Terminal, e.Outcome = d.Ticket, d.Terminal, t.Type
	}
	s.mu.Lock()
	s.got = append(s.got, e)
	if len(s.got) > keep {
		s.got = s.got[len(s.got)-keep:]
	}
	s.mu.Unlock()
	s.log.Info("webhook received", "webhook_id", e.ID, "verified", e.Verified, "ticket", e.Ticket, "outcome", e.Outcome)
	if !e.Verified {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

var page = template.Must(template.New("sink").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="3">
<title>ask dev stack: webhook deliveries</title>
<style>body{font:14px system-ui,sans-serif;margin:2em}td,th{padding:.3em .8em;text-align:left;vertical-align:top}code{font-size:12px}</style>
</head><body>
<h1>Webhook deliveries</h1>
<p>Asks made with <code>-webhook …/dev/webhooks/inbox</code> end here, signed with the dev stack's secret. This page refreshes every 3 s.</p>
<table><tr><th>received</th><th>webhook-id</th><th>signature</th><th>ticket</th><th>outcome</th><th>terminal event</th></tr>
{{range .}}<tr><td>{{.At.Format "15:04:05"}}</td><td><code>{{.ID}}</code></td><td>{{if .Verified}}verified{{else}}<b>not verified</b>{{end}}</td><td><code>{{.Ticket}}</code></td><td>{{.Outcome}}</td><td><code>{{printf "%s" .Terminal}}</code></td></tr>
{{else}}<tr><td colspan="6">Nothing yet. Try: <code>go run ./cmd/ask -webhook http://…/ask/dev/webhooks/inbox "How many sev1 incidents did we have in 2026-Q2?"</code></td></tr>{{end}}
</table></body></html>
`))
