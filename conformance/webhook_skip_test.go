package conformance_test

import (
	"net"
	"regexp"
	"strings"
	"testing"

	"github.com/das-ask/ask/conformance"
	"github.com/das-ask/ask/webhook/webhooktest"
)

// The webhook delivery checks run only when the target admits the suite's receiver and the
// suite holds the signing secret; otherwise they are skipped, saying which, never passed.
func TestWebhookChecksSkipWhenNotAdmitted(t *testing.T) {
	st := startStack(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := conformance.NewWebhookReceiver(l, "", st.hookSecret) // not in the stack's allow-list
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	for _, tc := range []struct {
		name string
		hook conformance.WebhookConfig
		why  string
	}{
		{"no receiver", conformance.WebhookConfig{}, "no webhook receiver"},
		{"no secret", conformance.WebhookConfig{Receiver: st.hooks}, "no signing secret"},
		{"not admitted", conformance.WebhookConfig{Receiver: stranger, Secrets: []string{webhooktest.Secret()}}, "does not admit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := st.config(st.main.AskURL, "", "")
			cfg.Webhooks = tc.hook
			cfg.Only = regexp.MustCompile(`^webhook\.(delivered-signed|retried-same-id|redirect-not-followed)$`)
			rep, err := conformance.Run(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Results) != 3 {
				t.Fatalf("%d results, want 3", len(rep.Results))
			}
			for _, r := range rep.Results {
				if r.Status != conformance.Skip || !strings.Contains(r.Detail, tc.why) {
					t.Errorf("%s: %s %q, want a skip saying %q", r.Name, r.Status, r.Detail, tc.why)
				}
			}
		})
	}
}
