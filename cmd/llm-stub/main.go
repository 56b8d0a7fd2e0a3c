// Command llm-stub serves the scripted, OpenAI-compatible model of the demo stack on loopback, so
// ASK_LLM=stub runs the agent's production OpenAI adapter against a deterministic model.
//
//	llm-stub [--addr 127.0.0.1:8092] [--script path] [--require-auth]
//
// The script is --script, else $ASK_STUB_SCRIPT, else the embedded default script (see package
// github.com/das-ask/ask/demo/llmstub for the format). The API is under /v1; the request log is at
// GET /_stub/requests, for loopback callers only. It stops on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/das-ask/ask/config"
	"github.com/das-ask/ask/demo/llmstub"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, os.Args[1:], config.Process, os.Stderr, logger, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		logger.Error("llm-stub failed", "err", err)
		os.Exit(1)
	}
}

// run parses args, starts the stub and serves until ctx ends. ready, if set, is told the address
// once the stub is listening.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), usage io.Writer, logger *slog.Logger, ready func(addr string)) error {
	env, err := config.StubFromEnv(lookup)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("llm-stub", flag.ContinueOnError)
	fs.SetOutput(usage)
	addr := fs.String("addr", "127.0.0.1:8092", "address to listen on")
	scriptPath := fs.String("script", "", "script file (default $"+llmstub.ScriptEnv+", then the embedded default script)")
	requireAuth := fs.Bool("require-auth", false, "require an Authorization: Bearer header (any non-empty key), like the real API")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return errors.New("unexpected arguments")
	}
	// Checked before the script is read: a listen address that cannot be one fails here,
	// named, not as "listen tcp: address bad: missing port in address".
	if !config.ListenAddrValid(*addr) {
		return fmt.Errorf("-addr %q: want host:port", *addr)
	}
	path, from := *scriptPath, "-script"
	if path == "" {
		path, from = env.Script, llmstub.ScriptEnv
	}
	var script *llmstub.Script
	if path != "" {
		if script, err = llmstub.LoadScript(path); err != nil {
			return fmt.Errorf("%s %q: %w", from, path, err)
		}
	} else {
		script, err = llmstub.DefaultScript()
		path = "(embedded default)"
	}
	if err != nil {
		return err
	}
	stub, err := llmstub.New(llmstub.Options{Script: script, Logger: logger, RequireAuth: *requireAuth})
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", *addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %w", *addr, err)
	}
	bound := ln.Addr().String()
	logger.Info("llm-stub listening", "addr", bound, "base_url", "http://"+bound+"/v1", "script", path,
		"require_auth", *requireAuth)
	if ready != nil {
		ready(bound)
	}
	return stub.Serve(ctx, ln)
}
