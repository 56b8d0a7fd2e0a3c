package app_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/config"
)

type noAuth struct{}

func (noAuth) Authenticate(context.Context, string) (ask.Identity, error) { return ask.Identity{}, nil }

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
		var logs bytes.Buffer
		m := app.NewMain(cfg)
		m.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		m.Authenticator = noAuth{}
		m.Runner = ask.RunnerFunc(func(_ context.Context, _ ask.Request, _ ask.Emitter) ask.Outcome { return ask.Outcome{} })
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
