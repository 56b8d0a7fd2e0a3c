package server

import (
	"testing"
	"time"
)

// TestPreferWait: wait's value is delta-seconds (RFC 7240 §4.3, RFC 9111 §1.2.2: one or more
// digits, a value too large to hold meaning the largest), so a wait of more seconds than an
// int64 holds is a wait as long as the cap allows, not no wait at all as it was; what is not
// delta-seconds is ignored.
func TestPreferWait(t *testing.T) {
	for _, tt := range []struct {
		h    string
		want time.Duration
		ok   bool
	}{
		{"wait=5", 5 * time.Second, true},
		{"wait=0", 0, true},
		{"respond-async, wait=30", 30 * time.Second, true},
		{"WAIT = 7", 7 * time.Second, true},
		{`wait="9"`, 9 * time.Second, true},
		{"wait=600", maxWait, true},
		{"wait=99999999999999999999", maxWait, true},
		{"wait=000000000000000000000000000001", time.Second, true},
		{"wait=-1", 0, false},
		{"wait=+5", 0, false},
		{"wait=5s", 0, false},
		{"wait=1.5", 0, false},
		{"wait=", 0, false},
		{`wait="5`, 0, false},
		{`wait=5"`, 0, false},
		{"wait=٣", 0, false}, // a digit, but not an ASCII one
		{"handling=strict; wait=5", 0, false},
	} {
		h := tt.h
		got, ok := preferWait(&h)
		if got != tt.want || ok != tt.ok {
			t.Errorf("preferWait(%q) = %s, %v; want %s, %v", tt.h, got, ok, tt.want, tt.ok)
		}
	}
}
