// Command askd is the ask service as an operator deploys it: package config reads the
// environment (every variable is listed in README.md's Configuration section and in package
// config), package app builds the service from it and serves.
//
// Invalid settings stop it at start with a message naming the variable. SIGINT or SIGTERM stops
// admitting asks, lets running asks finish for DAS_ASK_SHUTDOWN_GRACE_S, ends the rest with
// error{shutdown} and done, and exits; readiness turns false as soon as the signal arrives.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, config.Process, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "askd:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done. ready, when not nil, receives the running Main once serving.
func run(ctx context.Context, lookup func(string) (string, bool), stderr io.Writer, ready chan<- *app.Main) error {
	cfg, err := config.FromEnv(lookup)
	if err != nil {
		return err
	}
	m := app.NewMain(cfg)
	m.Logger = app.NewLogger(cfg.Ops, stderr)
	if err := m.Run(ctx); err != nil {
		return err
	}
	if ready != nil {
		ready <- m
	}
	select {
	case err := <-m.Done():
		return fmt.Errorf("serving: %w (and stopping: %v)", err, m.Close())
	case <-ctx.Done():
	}
	return m.Close()
}
