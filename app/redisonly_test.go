package app_test

import (
	"strings"
	"testing"

	"github.com/das-ask/ask/config"
)

// TestWarnsOfRedisSettingsTheMemoryStoreIgnores: with the in-memory store, the settings only
// the Redis store reads were ignored without a word, so an operator who set DAS_ASK_SEAL_KEYS
// believed the questions sealed. The start warns once, naming them, never their values (a seal
// key is a secret); with none of them set it says nothing of them.
func TestWarnsOfRedisSettingsTheMemoryStoreIgnores(t *testing.T) {
	const key = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes
	for _, c := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"all of them", map[string]string{"DAS_ASK_SEAL_KEYS": key, "DAS_ASK_REDIS_PREFIX": "hidden-prefix:", "DAS_ASK_LEASE_S": "5",
			"DAS_ASK_REDIS_BUCKETS": "4", "DAS_ASK_REDIS_CACHE_MB": "8"},
			[]string{"DAS_ASK_LEASE_S", "DAS_ASK_REDIS_PREFIX", "DAS_ASK_REDIS_BUCKETS", "DAS_ASK_REDIS_CACHE_MB", "DAS_ASK_SEAL_KEYS"}},
		{"the seal keys", map[string]string{"DAS_ASK_STORE": "memory", "DAS_ASK_SEAL_KEYS": key}, []string{"DAS_ASK_SEAL_KEYS"}},
		{"none", map[string]string{"DAS_ASK_STORE": "memory"}, nil},
	} {
		warnsOfIgnored(t, c.name, c.env, "settings only the Redis store reads are ignored", c.want, "MDEyMzQ1Njc4", "hidden-prefix")
	}
}

// warnsOfIgnored starts the service with env (on 127.0.0.1:0, no admin listener) and closes
// it, and holds its logs to one warning holding line that names the settings want names, in
// their order (ignored=A,B), when want names any, and no such warning otherwise; and to none of
// values, for a setting's value may be a secret.
func warnsOfIgnored(t *testing.T, name string, env map[string]string, line string, want []string, values ...string) {
	t.Helper()
	env["DAS_ASK_ADDR"], env["DAS_ASK_ADMIN_ADDR"] = "127.0.0.1:0", "off"
	cfg, err := config.FromEnv(config.MapEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	m, logs := quietMain(cfg)
	if err := m.Run(t.Context()); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
	got := logs.String()
	if n := strings.Count(got, line); n != min(len(want), 1) {
		t.Errorf("%s: %d warnings %q, want %d:\n%s", name, n, line, min(len(want), 1), got)
	}
	if len(want) > 0 && !strings.Contains(got, "ignored="+strings.Join(want, ",")) {
		t.Errorf("%s: the warning does not name %v:\n%s", name, want, got)
	}
	for _, v := range values {
		if strings.Contains(got, v) {
			t.Errorf("%s: the logs hold a value (%s):\n%s", name, v, got)
		}
	}
}
