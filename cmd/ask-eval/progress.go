package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/das-ask/ask/eval"
)

// progress shows the run as it goes: a bar redrawn in place on a terminal, one line per
// finished item otherwise. Items are named by id, never by their question.
type progress struct {
	mu      sync.Mutex
	w       io.Writer
	mode    string // bar, lines or none
	total   int
	done    int
	wrong   int
	start   time.Time
	stopc   chan struct{}
	stopped chan struct{}
}

func newProgress(mode string, w io.Writer, total int) *progress {
	if mode == "auto" {
		mode = "lines"
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			mode = "bar"
		}
	}
	p := &progress{w: w, mode: mode, total: total, start: time.Now(), stopc: make(chan struct{}), stopped: make(chan struct{})}
	if mode == "bar" {
		go p.tick()
	} else {
		close(p.stopped)
	}
	return p
}

// tick redraws the bar every half second, so the elapsed time moves during a long ask.
func (p *progress) tick() {
	defer close(p.stopped)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		p.mu.Lock()
		p.draw()
		p.mu.Unlock()
		select {
		case <-p.stopc:
			return
		case <-t.C:
		}
	}
}

func (p *progress) draw() {
	const width = 30
	filled := 0
	if p.total > 0 {
		filled = width * p.done / p.total
	}
	bar := strings.Repeat("█", filled) + strings.Repeat("░", width-filled)
	fmt.Fprintf(p.w, "\r\x1b[K%s %d/%d  %d off expectation  %s", bar, p.done, p.total, p.wrong, time.Since(p.start).Round(time.Second))
}

// item records a finished item (eval.Config.Progress).
func (p *progress) item(done, total int, r eval.ItemResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = done
	ok := r.AsExpected() && !isFalse(r.Correct) && !isFalse(r.Attributed) && !isFalse(r.CaveatsCarried)
	if !ok {
		p.wrong++
	}
	switch p.mode {
	case "bar":
		p.draw()
	case "lines":
		verdict := "ok"
		if !ok {
			verdict = "OFF"
		}
		term := "—"
		if r.TerminalMS >= 0 {
			term = (time.Duration(r.TerminalMS) * time.Millisecond).Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(p.w, "[%d/%d] %-3s %s: expected %s, got %s (%s)\n", done, total, verdict, r.ID, r.Expect, r.Got, term)
	}
}

// finished is how many items have been reported.
func (p *progress) finished() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

func (p *progress) stop() {
	if p.mode == "bar" {
		close(p.stopc)
		<-p.stopped
		p.mu.Lock()
		p.draw()
		fmt.Fprintln(p.w)
		p.mu.Unlock()
	}
}

func isFalse(p *bool) bool { return p != nil && !*p }
