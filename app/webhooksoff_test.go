package app_test

import "testing"

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
		// A prefix's own secrets are ignored as the shared ones are: askd stopped, for the
		// prefix was not one of an allow-list that is not set (found by an audit).
		{"a prefix's own secrets", map[string]string{"DAS_ASK_WEBHOOK_ENDPOINT_SECRETS": "https://a.example/ " + secret},
			[]string{"DAS_ASK_WEBHOOK_ENDPOINT_SECRETS"}},
		{"none", map[string]string{}, nil},
	} {
		warnsOfIgnored(t, c.name, c.env, "webhooks are off (DAS_ASK_WEBHOOK_ALLOW unset)", c.want, "MDEyMzQ1Njc4", "10.99.0.0")
	}
}
