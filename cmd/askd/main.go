// Command askd is the ask service as an operator deploys it: package config reads the
// environment (every variable is listed in README.md's Configuration section and in package
// config), package app builds the service from it and serves.
//
// Invalid settings stop it at start with a message naming the variable and exit status 2 (1
// for any other failure to start or serve). SIGINT, SIGTERM or SIGHUP stops admitting asks, lets
// running asks finish for DAS_ASK_SHUTDOWN_GRACE_S, ends the rest with error{shutdown} and
// done, and exits; readiness turns false as soon as the signal arrives. A second one ends the
// grace at once: the asks still running end then, as cleanly. SIGHUP is a stop, not a reload:
// askd's settings are its environment, which a running process cannot be given anew, and Go's
// default for it (the terminal askd runs in closing) was to die at once, streams cut and, with
// the in-memory store, every ticket lost.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/das-ask/ask/app"
	"github.com/das-ask/ask/auth"
	"github.com/das-ask/ask/config"
)

func main() {
	if code, done := usage(os.Args[1:], os.Stdout, os.Stderr); done {
		os.Exit(code)
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	if err := run(sigs, config.Process, os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "askd:", err)
		os.Exit(exitStatus(err))
	}
}

// environNames lists the names the environment sets, for config.Unknown; tests replace it.
var environNames = config.ProcessNames

// exitStatus is askd's exit status for run's error: 2 when a setting is invalid (the
// environment must change: a supervisor restarting askd as it is would only fail again), 1 for
// any other failure to start or to serve (a port in use, a store that cannot be reached).
func exitStatus(err error) int {
	if errors.Is(err, config.ErrInvalid) || errors.Is(err, auth.ErrInvalidConfig) {
		return 2
	}
	return 1
}

// usageText is what -h prints: askd reads no flags, so where its settings come from.
const usageText = `usage: askd

askd is the ask service as deployed. It takes no arguments: every setting is an environment
variable (README.md, "Configuration"; package config). It needs at least
  DAS_JWKS_URL   the URL of the token issuer's JWKS
  DAS_ISSUER     the exact iss to accept
  DAS_AUDIENCE   the aud to accept
and listens on DAS_ASK_ADDR (default 127.0.0.1:8080), its metrics and probes on DAS_ASK_ADMIN_ADDR
(default 127.0.0.1:9090). An invalid setting, or a DAS_ name that is no setting (a misspelling),
stops it at start, naming the variable, with exit status 2; any other failure to start or serve
exits 1.
SIGINT, SIGTERM or SIGHUP stops it gracefully (DAS_ASK_SHUTDOWN_GRACE_S); a second one ends
the grace. SIGHUP reloads nothing: start askd again with the new environment.
For the whole development system with embedded defaults, run ask-serve (make ask-serve).
`

// usage answers -h (and -help, --help) with usageText on stdout, exit 0, and refuses any other
// argument, exit 2: askd is configured by its environment, and an argument it ignored (a flag
// meant for ask-serve, say) would leave an operator believing it had been applied. done is
// false when there are no arguments: askd runs.
func usage(args []string, stdout, stderr io.Writer) (code int, done bool) {
	if len(args) == 0 {
		return 0, false
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprint(stdout, usageText)
		return 0, true
	}
	fmt.Fprintf(stderr, "askd: unexpected argument %q: askd takes no arguments, its settings are environment variables (askd -h)\n", args[0])
	return 2, true
}

// run serves until the first signal on sigs, then stops; a second signal ends the shutdown
// grace. ready, when not nil, receives the running Main once serving.
func run(sigs <-chan os.Signal, lookup func(string) (string, bool), stderr io.Writer, ready chan<- *app.Main) error {
	cfg, err := config.FromEnv(lookup)
	// A misspelt DAS_ name is as wrong as a bad value: left alone, its setting kept its default
	// unseen (DAS_ASK_TLL_S=60 served with the 900 s TTL).
	if err = errors.Join(err, config.Unknown(environNames())); err != nil {
		return err
	}
	m := app.NewMain(cfg)
	m.Logger = app.NewLogger(cfg.Ops, stderr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first signal cancels ctx, which ends a start under way or the serving; run then logs
	// what it stops (a start, or running asks), for only it knows which. A second one ends the
	// grace, once run has said that there is one.
	first := make(chan os.Signal, 1)
	ended, stopping, watched := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { // the signals' one reader; it ends before run returns
		defer close(watched)
		select {
		case s := <-sigs:
			first <- s
			cancel()
		case <-ended:
			return
		}
		select {
		case <-stopping:
		case <-ended:
			return
		}
		select {
		case s := <-sigs:
			m.Logger.Warn("ending the shutdown grace: running asks end now with error{shutdown}", "signal", s.String())
			m.EndGrace()
		case <-ended:
		}
	}()
	defer func() { close(ended); <-watched }()
	if err := m.Run(ctx); err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			// a signal while starting (a store or an IdP slow to answer): a stop asked for, not
			// a failure to start, which a supervisor would record and restart; nothing ran
			m.Logger.Info("stopped while starting", "signal", (<-first).String(), "cause", err.Error())
			return nil
		}
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
	if sig := (<-first).String(); m.Grace() > 0 {
		m.Logger.Info("stopping: running asks have the shutdown grace to finish; a second signal ends them now", "signal", sig, "grace", m.Grace().String())
	} else {
		// DAS_ASK_SHUTDOWN_GRACE_S=0: there is no grace to end.
		m.Logger.Info("stopping: no shutdown grace: running asks end now with error{shutdown}", "signal", sig)
	}
	close(stopping)
	return m.Close()
}
