package main

import (
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/store/seal"
)

func TestStoreConfig(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		want    storeConfig
		wantErr string
	}{
		{env: nil, want: storeConfig{}},
		{env: map[string]string{"DAS_ASK_STORE": "memory"}, want: storeConfig{}},
		{env: map[string]string{"DAS_ASK_STORE": "redis://127.0.0.1:6390/0", "DAS_ASK_LEASE_S": "3", "DAS_ASK_REDIS_PREFIX": "x:"},
			want: storeConfig{url: "redis://127.0.0.1:6390/0", lease: 3 * time.Second, prefix: "x:"}},
		{env: map[string]string{"DAS_ASK_STORE": "postgres://u:hunter2@db/ask"}, wantErr: "DAS_ASK_STORE"},
		{env: map[string]string{"DAS_ASK_LEASE_S": "0"}, wantErr: "DAS_ASK_LEASE_S"},
		{env: map[string]string{"DAS_ASK_SEAL_KEYS": "k1:aHVudGVyMg=="}, wantErr: "DAS_ASK_SEAL_KEYS"}, // too short
		{env: map[string]string{"DAS_ASK_SEAL_KEYS": "hunter2"}, wantErr: "DAS_ASK_SEAL_KEYS"},
	} {
		got, err := storeConfigFrom(func(k string) string { return tc.env[k] })
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "aHVudGVyMg") {
				t.Errorf("%v: error %v, want one naming %s and no password", tc.env, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %+v, %v; want %+v", tc.env, got, err, tc.want)
		}
	}
}

func TestStoreConfigSealKeys(t *testing.T) {
	k1, k2 := seal.NewKey("k1"), seal.NewKey("k2")
	got, err := storeConfigFrom(func(k string) string {
		return map[string]string{"DAS_ASK_STORE": "redis://127.0.0.1:6390/0", "DAS_ASK_SEAL_KEYS": k2 + "," + k1}[k]
	})
	if err != nil || got.seal == nil || got.seal.SealingKey() != "k2" {
		t.Fatalf("%+v, %v; want keys sealing with k2", got, err)
	}
}
