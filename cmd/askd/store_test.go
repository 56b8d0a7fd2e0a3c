package main

import (
	"strings"
	"testing"
	"time"
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
	} {
		got, err := storeConfigFrom(func(k string) string { return tc.env[k] })
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("%v: error %v, want one naming %s and no password", tc.env, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %+v, %v; want %+v", tc.env, got, err, tc.want)
		}
	}
}
