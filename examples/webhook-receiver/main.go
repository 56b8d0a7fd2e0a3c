// Command webhook-receiver is a small receiver of the ask service's webhooks: it verifies each
// delivery's Standard Webhooks signature with the operator's secret(s), ignores a delivery id
// it has already handled (retries repeat the id), and prints how the ask ended.
//
//	WEBHOOK_SECRETS=whsec_... go run ./examples/webhook-receiver -addr 127.0.0.1:8099
//
// Point an ask at it with `ask -webhook http://127.0.0.1:8099/hook "..."` (the operator's
// DAS_ASK_WEBHOOK_ALLOW must admit that URL; beside make ask-serve, start the dev stack with
// DAS_ASK_WEBHOOK_ALLOW=http://127.0.0.1:8099/ and DAS_ASK_WEBHOOK_SECRETS set to the same secret).
// The default address is clear of every port make ask-serve listens on.
package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// delivery is the body: the terminal event and done, as on the stream.
type delivery struct {
	Type           string          `json:"type"`
	Ticket         string          `json:"ticket"`
	ConversationID string          `json:"conversation_id"`
	Terminal       json.RawMessage `json:"terminal"`
	Done           json.RawMessage `json:"done"`
}

// receiver verifies and handles deliveries; handle runs once per delivery id.
type receiver struct {
	secrets []*standardwebhooks.Webhook
	handle  func(id string, d delivery)

	mu   sync.Mutex
	seen map[string]bool
}

func newReceiver(secrets []string, handle func(string, delivery)) (*receiver, error) {
	r := &receiver{handle: handle, seen: map[string]bool{}}
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if s == "" {
			continue // WEBHOOK_SECRETS unset splits into one empty entry
		}
		// The library takes an empty key, and with an empty key anyone can sign: refuse it.
		if key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_")); err != nil || len(key) == 0 {
			return nil, errors.New("secret: want whsec_ followed by base64 (the operator's DAS_ASK_WEBHOOK_SECRETS)")
		}
		w, err := standardwebhooks.NewWebhook(s)
		if err != nil {
			return nil, fmt.Errorf("secret: %w", err)
		}
		r.secrets = append(r.secrets, w)
	}
	if len(r.secrets) == 0 {
		return nil, errors.New("no secret: set WEBHOOK_SECRETS=whsec_<base64>")
	}
	return r, nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost) // a 405 names the methods it takes (RFC 9110 §15.5.6)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	verified := false
	for _, s := range r.secrets { // during a rotation, either secret may match
		if s.Verify(body, req.Header) == nil { // signature and timestamp (±5 minutes)
			verified = true
			break
		}
	}
	if !verified {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var d delivery
	if err := json.Unmarshal(body, &d); err != nil {
		http.Error(w, "not a delivery", http.StatusBadRequest)
		return
	}
	id := req.Header.Get(standardwebhooks.HeaderWebhookID)
	r.mu.Lock()
	dup := r.seen[id]
	r.seen[id] = true
	r.mu.Unlock()
	if !dup {
		r.handle(id, d)
	}
	w.WriteHeader(http.StatusNoContent) // 2xx: the service stops retrying
}

// defaultAddr is clear of the dev stack's ports (make ask-serve: 8080, 8090–8093, 9090), so the
// receiver runs beside it.
const defaultAddr = "127.0.0.1:8099"

func main() {
	addr := flag.String("addr", defaultAddr, "listen address")
	flag.Parse()
	r, err := newReceiver(strings.Split(os.Getenv("WEBHOOK_SECRETS"), ","), func(id string, d delivery) {
		var term struct {
			Type string `json:"type"`
			Text string `json:"text"`
			Kind string `json:"kind"`
		}
		_ = json.Unmarshal(d.Terminal, &term)
		fmt.Printf("%s ticket %s ended: %s %s%s\n", id, d.Ticket, term.Type, term.Kind, term.Text)
	})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("receiving webhooks on http://%s/", *addr)
	log.Fatal(http.ListenAndServe(*addr, r))
}
