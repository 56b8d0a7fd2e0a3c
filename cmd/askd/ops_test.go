package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/das-ask/ask/server"
)

// TestAdminAddrTaken: a configured admin address that cannot be listened on stops askd; the
// default one, held by another process (a second replica on the host), is skipped with a
// warning naming the variable.
func TestAdminAddrTaken(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.Addr().String()

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	op, err := newOps(t.Context(), func(k string) string {
		if k == "DAS_ASK_ADMIN_ADDR" {
			return addr
		}
		return ""
	}, log, server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	op.instrument(nil, server.Config{}, nil)
	if _, _, err := op.serveAdmin(log); err == nil || !strings.Contains(err.Error(), "DAS_ASK_ADMIN_ADDR") {
		t.Errorf("configured address taken: %v, want an error naming DAS_ASK_ADMIN_ADDR", err)
	}

	op.explicit = false // as if addr were the default
	got, stop, err := op.serveAdmin(log)
	if err != nil || got != "" {
		t.Fatalf("default address taken: %q, %v; want it skipped", got, err)
	}
	if err := stop(context.Background()); err != nil {
		t.Error(err)
	}
	if !strings.Contains(logs.String(), "DAS_ASK_ADMIN_ADDR") {
		t.Errorf("no warning naming DAS_ASK_ADMIN_ADDR: %s", logs.String())
	}
}
