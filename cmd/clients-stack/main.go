// Command clients-stack runs the development stack (package demo/stack) with the reference web
// page, for the TypeScript, Python and browser tests in scripts/clients-test.sh: every listener
// on 127.0.0.1 with an ephemeral port unless told otherwise, state in memory.
//
//	clients-stack [-urls FILE] [-addr 127.0.0.1:0] [-phase 1|2] [-v]
//
// Once everything accepts connections it writes {"ask": ..., "idp": ..., "ui": ..., "source": ...}
// as one JSON line to FILE (atomically, so a waiting script never reads half of it) and to
// stdout, then runs until SIGINT or SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/das-ask/ask/demo/stack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "clients-stack:", err)
		os.Exit(1)
	}
}

// URLs is what the stack's clients need to find it.
type URLs struct {
	Ask    string `json:"ask"`
	IdP    string `json:"idp"`
	UI     string `json:"ui"`
	Source string `json:"source"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("clients-stack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	urlsFile := fs.String("urls", "", "write the stack's URLs here as JSON once it is up")
	addr := fs.String("addr", "", "the ask service's listen address (default 127.0.0.1:0)")
	verbose := fs.Bool("v", false, "info logs (default: warnings only)")
	phase := fs.Int("phase", 1, "2: the split demo (a catalog and a warehouse source) in phase 2, with divergence")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // the usage was asked for, and printed
		}
		return err
	}
	// An argument is refused, not ignored ("-v false" parsed as -v and an argument "false").
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: clients-stack takes flags only; a boolean flag takes its value after =, as -v=false", fs.Arg(0))
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	if *phase != 1 && *phase != 2 {
		return fmt.Errorf("-phase %d: want 1 or 2", *phase)
	}
	s, err := stack.Start(ctx, stack.Options{
		AskAddr: *addr,
		UI:      true,
		Logger:  slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
		Phase:   *phase,
		Split:   *phase == 2,
	})
	if err != nil {
		return err
	}
	b, err := json.Marshal(URLs{Ask: s.AskURL, IdP: s.IdPURL, UI: s.UIURL, Source: s.SourceURL})
	if err != nil {
		return errors.Join(err, s.Close())
	}
	if *urlsFile != "" {
		if err := writeAtomic(*urlsFile, append(b, '\n')); err != nil {
			return errors.Join(err, s.Close())
		}
	}
	fmt.Fprintf(stdout, "%s\n", b)
	<-ctx.Done()
	return s.Close()
}

func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".clients-stack-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
