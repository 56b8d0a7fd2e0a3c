package app_test

import (
	"strings"
	"testing"

	"github.com/das-ask/ask/config"
)

// TestWarnsOfWebhookSettingsIgnoredWhileOff: with DAS_ASK_WEBHOOK_ALLOW unset, webhooks are off
// and every other DAS_ASK_WEBHOOK_* setting is ignored. askd started without a word of it, so an
// operator who set the secrets, the attempts and the addresses and forgot (or misspelt) the
// allow-list believed webhooks on, until each ask naming one was refused 400. The start warns
// once, naming them, never their values (a secret signs); with none set it says nothing.
func TestWarnsOfWebhookSettingsIgnoredWhileOff(t *testing.T) {
	const secret = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
	for _, c := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"all of them", map[string]string{"DAS_ASK_WEBHOOK_SECRETS": secret, "DAS_ASK_WEBHOOK_ALLOW_ADDRS": "10.99.0.0/16",
			"DAS_ASK_WEBHOOK_MAX_ATTEMPTS": "3", "DAS_ASK_WEBHOOK_TIMEOUT_S": "5"},
			[]string{"DAS_ASK_WEBHOOK_SECRETS", "DAS_ASK_WEBHOOK_ALLOW_ADDRS", "DAS_ASK_WEBHOOK_MAX_ATTEMPTS", "DAS_ASK_WEBHOOK_TIMEOUT_S"}},
		{"the secrets", map[string]string{"DAS_ASK_WEBHOOK_SECRETS": secret}, []string{"DAS_ASK_WEBHOOK_SECRETS"}},
		{"none", map[string]string{}, nil},
	} {
		c.env["DAS_ASK_ADDR"], c.env["DAS_ASK_ADMIN_ADDR"] = "127.0.0.1:0", "off"
		cfg, err := config.FromEnv(config.MapEnv(c.env))
		if err != nil {
			t.Fatal(err)
		}
		m, logs := quietMain(cfg)
		if err := m.Run(t.Context()); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := m.Close(); err != nil {
			t.Error(err)
		}
		got := logs.String()
		if n := strings.Count(got, "webhooks are off (DAS_ASK_WEBHOOK_ALLOW unset)"); n != min(len(c.want), 1) {
			t.Errorf("%s: %d warnings of ignored webhook settings, want %d:\n%s", c.name, n, min(len(c.want), 1), got)
		}
		if len(c.want) > 0 && !strings.Contains(got, "ignored="+strings.Join(c.want, ",")) {
			t.Errorf("%s: the warning does not name %v:\n%s", c.name, c.want, got)
		}
		for _, v := range []string{"MDEyMzQ1Njc4", "10.99.0.0"} {
			if strings.Contains(got, v) {
				t.Errorf("%s: the logs hold a value (%s):\n%s", c.name, v, got)
			}
		}
	}
}
