// Package proctest reads a child process's output line by line, for the tests that start one of
// the project's binaries (the test binary re-run as it), signal it and wait for what it says.
package proctest

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"time"
)

// Output is what a child has written so far on one stream, read as it comes.
type Output struct {
	t     testing.TB
	name  string
	lines chan string
	seen  strings.Builder
}

// Watch reads r (a child's stdout or stderr pipe) line by line until it ends; name says whose
// output it is in failures. The reading goroutine ends when r does (the child exits).
func Watch(t testing.TB, name string, r io.Reader) *Output {
	o := &Output{t: t, name: name, lines: make(chan string)}
	go func() {
		defer close(o.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			o.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, r) // a line past the scanner's bound: the child must not block
	}()
	return o
}

// WaitFor reads lines until one holds msg, failing the test if the output ends first or within
// passes.
func (o *Output) WaitFor(msg string, within time.Duration) {
	o.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l, ok := <-o.lines:
			if !ok {
				o.t.Fatalf("%s ended before saying %q:\n%s", o.name, msg, o.seen.String())
			}
			o.seen.WriteString(l + "\n")
			if strings.Contains(l, msg) {
				return
			}
		case <-deadline:
			o.t.Fatalf("%s did not say %q within %s:\n%s", o.name, msg, within, o.seen.String())
		}
	}
}

// Drain reads the rest, until the child closes the stream.
func (o *Output) Drain() {
	for l := range o.lines {
		o.seen.WriteString(l + "\n")
	}
}

// String is every line read so far.
func (o *Output) String() string { return o.seen.String() }
