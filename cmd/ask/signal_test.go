package main

import (
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// The terminal closing (SIGHUP) cancels the run as Ctrl-C does. It killed the command at once,
// the run going on, uncancelled, on the service. A guard keeps this test's process alive when
// SIGHUP is not among the signals: the failure is then the missing cancel, not a dead binary.
func TestTheTerminalClosingCancelsAsCtrlCDoes(t *testing.T) {
	if signal.Ignored(syscall.SIGHUP) {
		t.Skip("SIGHUP is ignored here (nohup): ask leaves it so")
	}
	sigs := interruptSignals()
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, syscall.SIGHUP)
	defer signal.Stop(guard)
	ctx, stop := signal.NotifyContext(t.Context(), sigs...)
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("SIGHUP did not interrupt the command (its signals: %v)", sigs)
	}
}
