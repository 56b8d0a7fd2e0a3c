package app_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/config"
)

type noAuth struct{}

func (noAuth) Authenticate(context.Context, string) (ask.Identity, error) { return ask.Identity{}, nil }

// quietMain is a Main on cfg that admits anyone and whose runs end at once with nothing, its
// logs written to the buffer returned.
func quietMain(cfg config.Config) (*app.Main, *bytes.Buffer) {
	var logs bytes.Buffer
	m := app.NewMain(cfg)
	m.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	m.Authenticator = noAuth{}
	m.Runner = ask.RunnerFunc(func(context.Context, ask.Request, ask.Emitter) ask.Outcome { return ask.Outcome{} })
	return m, &logs
}

// TestAdminAddrTaken: a configured admin address that cannot be listened on stops the start,
// naming its variable; the default one, held by another process (a second replica on the
// host), is skipped with a warning naming the variable.
func TestAdminAddrTaken(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for _, optional := range []bool{false, true} {
		cfg := config.DefaultConfig()
		cfg.Addr = "127.0.0.1:0"
		cfg.Ops.AdminAddr, cfg.Ops.AdminOptional = held.Addr().String(), optional
		m, logs := quietMain(cfg)
		err := m.Run(t.Context())
		switch {
		case !optional && (err == nil || !strings.Contains(err.Error(), "DAS_ASK_ADMIN_ADDR")):
			t.Errorf("configured address taken: %v, want an error naming DAS_ASK_ADMIN_ADDR", err)
		case optional && err != nil:
			t.Errorf("default address taken: %v, want it skipped", err)
		case optional && (m.AdminAddr() != "" || !strings.Contains(logs.String(), "DAS_ASK_ADMIN_ADDR")):
			t.Errorf("default address taken: admin at %q, logs %s; want none and a warning naming DAS_ASK_ADMIN_ADDR", m.AdminAddr(), logs.String())
		}
		if err == nil {
			if err := m.Close(); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestAddrTaken: an API address that cannot be listened on stops the start with an error
// naming DAS_ASK_ADDR, as the admin listener's names its variable, and logs nothing about
// shutting down: no ask was ever admitted. askd said "listen tcp …: address already in use"
// after an info line "shutting down" with its grace, as if a signal had come.
func TestAddrTaken(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	cfg := config.DefaultConfig()
	cfg.Addr, cfg.Ops.AdminAddr = held.Addr().String(), ""
	m, logs := quietMain(cfg)
	err = m.Run(t.Context())
	if err == nil {
		m.Close()
		t.Fatal("Run on a taken address: served")
	}
	if !strings.Contains(err.Error(), "DAS_ASK_ADDR") || !strings.Contains(err.Error(), held.Addr().String()) {
		t.Errorf("Run on a taken address: %v; want an error naming DAS_ASK_ADDR and the address", err)
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("Run on a taken address: %v; want it to wrap EADDRINUSE, which callers test for", err)
	}
	if strings.Contains(logs.String(), "shutting down") {
		t.Errorf("a start that never served logged a shutdown:\n%s", logs.String())
	}
}
