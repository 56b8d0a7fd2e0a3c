package app_test

import (
	"crypto/rand"
	"strings"
	"testing"

	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestWarnsWhenOneIdentityCanFillItsBucket: DAS_ASK_MAX_TICKETS holds per Redis bucket when
// the keys are spread over buckets; when an identity's own cap reaches its share (a cluster's
// defaults: 16 buckets of 625 tickets, 1000 an identity; or, in one store, a DAS_ASK_MAX_TICKETS
// at or below the cap), one identity can fill it and lock out every other identity there, so
// the start says so, naming the variables and the DAS_ASK_MAX_TICKETS that would not; with
// enough tickets for every identity's cap it says nothing.
func TestWarnsWhenOneIdentityCanFillItsBucket(t *testing.T) {
	srv := redistest.Start(t)
	for _, c := range []struct {
		name       string
		buckets    int
		maxTickets int
		warns      []string
	}{
		{"a cluster's defaults", 16, 10000, []string{"DAS_ASK_MAX_RETAINED_PER_ID", "max_tickets_wanted=16016"}},
		{"one bucket", 1, 10000, nil},
		{"one bucket with fewer tickets than an identity's cap", 1, 1000, []string{"DAS_ASK_MAX_RETAINED_PER_ID", "max_tickets_wanted=1001"}},
		{"in memory with fewer tickets than an identity's cap", -1, 500, []string{"DAS_ASK_MAX_RETAINED_PER_ID", "max_tickets_wanted=1001"}},
		{"in memory by default", -1, 10000, nil},
		{"tickets enough for every identity's cap", 16, 16016, nil},
		{"conversations over the share", 16, 1600, []string{"DAS_ASK_MAX_RETAINED_PER_ID", "DAS_ASK_MAX_CONVERSATIONS_PER_ID"}},
	} {
		cfg := config.DefaultConfig()
		cfg.Addr, cfg.Ops.AdminAddr = "127.0.0.1:0", ""
		if c.buckets >= 0 { // -1: the in-memory store
			cfg.Store.URL, cfg.Store.Prefix, cfg.Store.Buckets = srv.URL, "share:"+rand.Text()+":", c.buckets
		}
		cfg.Service.MaxTickets = c.maxTickets
		m, logs := quietMain(cfg)
		if err := m.Run(t.Context()); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := m.Close(); err != nil {
			t.Error(err)
		}
		warned := strings.Contains(logs.String(), "one identity can fill the capacity the others share")
		if warned != (len(c.warns) > 0) {
			t.Errorf("%s: warned %v, want %v:\n%s", c.name, warned, len(c.warns) > 0, logs.String())
		}
		for _, w := range c.warns {
			if !strings.Contains(logs.String(), w) {
				t.Errorf("%s: the warning does not name %s:\n%s", c.name, w, logs.String())
			}
		}
	}
}
