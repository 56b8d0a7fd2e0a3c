// Command ask asks the ask service a question from a terminal and prints the outcome.
//
//	ask [flags] QUESTION...
//	ask [flags] -q QUESTION
//	ask [flags] -q - < FILE
//	ask [flags] --follow TICKET
//	ask [flags] --cancel TICKET
//
// While the run works, ask says what it is doing on stderr, in its own words ("Looking up
// 'incident' in the catalog…"); with --steps it also lists every tool call. On a terminal it
// shows a spinner while the run is silent; when stdout or stderr is not a terminal it writes
// plain lines. Then it prints the outcome on stdout: an answer with its result, its caveats
// (always) and what it rests on; or an abstention (what was tried, and the agent's own words
// when it asked something back), or a refusal, each worded as what it is and never like an
// answer; or why the run failed, timed out or was cancelled. An answer that would have been
// different without the catalog's definitions (answer.divergence, phase 2) says so: "Without the
// catalog's definition of …, the answer would have been …". stderr carries progress and the
// command's own failures only. --json prints every event as one JSON line instead (NDJSON).
//
// Ctrl-C (SIGTERM, or SIGHUP: the terminal closing, unless ignored as nohup does) cancels
// the run on the service (one cancel), waits for the run to confirm (at most 5 s, the cancel
// request included) and exits with status 4; before the ask was made it asks nothing and
// exits 4 too. While the service has not yet answered the ask itself, ask waits for
// that answer (it may hold a ticket to cancel) for the same 5 s, then says the ask may have
// been made, and exits 4. A second Ctrl-C exits at once; the first named the ticket, so
// --follow can still show how the run ended. A reader of stdout or stderr that goes away while
// the run works (ask --json … | head -1) is taken as Ctrl-C: the run is cancelled, not left going
// behind a command SIGPIPE killed; once the outcome has come, it changes nothing.
//
// --follow TICKET prints an ask made earlier (by this identity, and still held by the service)
// as if it had just been asked: its progress from the start, then its outcome and exit status.
// It is how to pick up a run whose stream was lost, whose ask was left with a second Ctrl-C, or
// that is running in another terminal (a 409 names it). Ctrl-C while following stops watching
// and cancels nothing: ask exits 130 and the run goes on. A ticket the service does not hold
// for this identity (expired, another's, or never made) is one line on stderr and status 1.
//
// --cancel TICKET cancels an ask made earlier (one cancel), then prints how it ended as --follow
// does: cancelled (status 4), or, for a run that had ended before the cancel arrived, the
// outcome it had, which a cancel never changes. Ctrl-C while it waits stops watching (130).
//
// Flags may come before or after the question's words; everything after -- is the question.
// -q - reads the question from stdin, to its end: it is then neither on the command line, which
// any user's ps shows, nor subject to the shell's quoting.
// What the service sends (an answer's text, a source's reason) is printed as text: a control
// character in it is shown as its escape (\x1b), never acted on by the terminal. A password in
// --url (http://user:password@host/ask) is shown as "xxxxx" wherever ask names the URL.
//
// Exit status:
//
//	0  answer
//	1  usage error, or the service could not be reached or refused the request
//	2  abstention: the catalog had nothing to answer with
//	3  refusal: a source refused (a permissions decision, not an empty result)
//	4  error: the run failed, timed out or was cancelled
//	130  Ctrl-C while following a ticket with --follow or --cancel (the run goes on)
//
// A second Ctrl-C (or SIGTERM) ends ask by the signal itself, with no status of its own (a shell
// shows 128 + the signal's number: 130 for Ctrl-C); the first named the ticket.
//
// Flags and environment:
//
//	--url URL     the service, gateway prefix included ($ASK_URL; default http://127.0.0.1:8080/ask)
//	--token T     the bearer ($ASK_TOKEN); without one, ask mints a token for --as from the
//	              dev identity provider at $ASK_IDP (default http://127.0.0.1:8090)
//	--as OID      the identity to mint a token for ($ASK_OID; default alice)
//	--continue    ask in the last conversation used with this URL and identity, so a follow-up
//	              can refer to the previous answer; it is kept in $XDG_STATE_HOME/ask
//	              (default ~/.local/state/ask)
//	--steps       also show every tool call, the SQL that ran and how the answer was reached
//	--json        print the events as NDJSON on stdout
//	--webhook URL also have the run's end POSTed, signed, to URL, one the operator allows
//	              ($ASK_WEBHOOK; docs/webhooks.md)
//	--follow T    follow ticket T to its end instead of asking (no question, --continue or --webhook)
//	--cancel T    cancel ticket T, then follow it to its end (as --follow)
//	--branches    phase 2: show every branch's progress (collapsed by default: one line per
//	              branch as it opens, then the supervisor's progress; --steps expands too)
//	ASK_PROGRESS  "plain" or "tty" to force the progress style
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	askconfig "github.com/das-ask/ask/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), interruptSignals()...)
	go func() {
		// After the first signal, restore the default so a second Ctrl-C ends the process.
		<-ctx.Done()
		stop()
	}()
	// A reader of the output that has gone (ask … | head -1) ends the run as Ctrl-C does.
	ctx, stopWatch := untilReaderGone(ctx, int(os.Stdout.Fd()), int(os.Stderr.Fd()))
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, askconfig.Process)
	stopWatch()
	stop()
	os.Exit(code)
}

// interruptSignals are the signals that cancel the run as Ctrl-C does: SIGINT, SIGTERM, and
// SIGHUP, the terminal closing, unless it is ignored (nohup ask …: the run is meant to outlive
// the terminal). SIGHUP's default was to die at once, the run left going on the service,
// uncancelled, spending its owner's quota with no one to read it.
func interruptSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}
