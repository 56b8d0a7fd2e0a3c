package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	askconfig "github.com/das-ask/ask/config"
)

// progress shows what the run is doing on stderr. Line prints a lasting line, shown as text
// whatever it holds (oneLine); Stop ends the display. Safe for concurrent use.
type progress interface {
	Line(s string)
	Stop()
}

// plainProgress writes one line per milestone, for pipes and logs.
type plainProgress struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *plainProgress) Line(s string) {
	s = oneLine(s)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = fmt.Fprintln(p.w, s)
}

func (p *plainProgress) Stop() {}

// spinnerProgress keeps one live line at the bottom of a terminal — a spinner, the current
// phase and the seconds since it began — so a silent model turn never looks like a hang. The
// live line is cut to the terminal's width: a line that wrapped would leave a row behind at
// every redraw, since erasing the line erases only the row the cursor is on.
type spinnerProgress struct {
	mu      sync.Mutex
	w       io.Writer
	cols    func() int // the terminal's columns now (it may be resized); 0 or less: 80
	phase   string
	since   time.Time
	frame   int
	stop    chan struct{}
	stopped chan struct{}
}

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// newSpinner draws on w, a terminal cols() columns wide.
func newSpinner(w io.Writer, phase string, cols func() int) *spinnerProgress {
	p := &spinnerProgress{w: w, cols: cols, phase: phase, since: time.Now(), stop: make(chan struct{}), stopped: make(chan struct{})}
	go p.loop()
	return p
}

func (p *spinnerProgress) loop() {
	defer close(p.stopped)
	t := time.NewTicker(120 * time.Millisecond)
	defer t.Stop()
	for {
		p.mu.Lock()
		p.draw()
		p.mu.Unlock()
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
	}
}

// draw rewrites the live line; the caller holds mu.
func (p *spinnerProgress) draw() {
	p.frame = (p.frame + 1) % len(spinnerFrames)
	age := fmt.Sprintf(" %ds", int(time.Since(p.since).Seconds()))
	// The frame and its space are two columns; one more is left free, as a terminal that
	// fills its last column may wrap.
	width := p.cols()
	if width <= 0 {
		width = 80
	}
	phase := []rune(p.phase)
	if room := width - 3 - len(age); len(phase) > room {
		phase = append(phase[:max(room-1, 0)], '…')
	}
	_, _ = fmt.Fprintf(p.w, "\r\x1b[2K%s %s%s", spinnerFrames[p.frame], string(phase), age)
}

func (p *spinnerProgress) Line(s string) {
	s = oneLine(s)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = fmt.Fprintf(p.w, "\r\x1b[2K%s\n", s)
	p.phase, p.since = s, time.Now()
	select {
	case <-p.stop: // stopped: a late line stays a plain line
	default:
		p.draw()
	}
}

func (p *spinnerProgress) Stop() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.stopped
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(p.w, "\r\x1b[2K")
}

// widthOf is the columns of the terminal w is, or 0 when that cannot be told.
func widthOf(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return cols
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// wantSpinner reports whether progress should be the spinner: when both stdout and stderr are
// terminals (or ASK_PROGRESS=tty), not plain lines (or ASK_PROGRESS=plain). It must be given the
// process's own files, not a wrapper around them.
func wantSpinner(stdout, stderr io.Writer, env askconfig.Client) bool {
	tty := isTerminal(stdout) && isTerminal(stderr) && !env.DumbTerminal
	switch env.Progress {
	case "tty":
		tty = true
	case "plain":
		tty = false
	}
	return tty
}
