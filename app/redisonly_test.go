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
		if n := strings.Count(got, "settings only the Redis store reads are ignored"); n != min(len(c.want), 1) {
			t.Errorf("%s: %d warnings of ignored settings, want %d:\n%s", c.name, n, min(len(c.want), 1), got)
		}
		if len(c.want) > 0 && !strings.Contains(got, "ignored="+strings.Join(c.want, ",")) {
			t.Errorf("%s: the warning does not name %v:\n%s", c.name, c.want, got)
		}
		for _, secret := range []string{"MDEyMzQ1Njc4", "hidden-prefix"} {
			if strings.Contains(got, secret) {
				t.Errorf("%s: the logs hold a value (%s):\n%s", c.name, secret, got)
			}
		}
	}
}
