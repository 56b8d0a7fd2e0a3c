package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// proc is one process of the cluster, its output in a log file (and, when echo is set,
// also on echo, each line prefixed with the process's name).
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // set before done is closed
}

// startProc starts bin with args and env (added to this process's environment). It is killed
// (SIGKILL) if the launcher dies.
func startProc(name, logDir, bin string, args, env []string, echo io.Writer) (*proc, error) {
	return startProcLog(name, logDir, bin, args, env, echo, os.O_TRUNC, syscall.SIGKILL)
}

// restartProc is startProc for a process started again: its log is appended to.
func restartProc(name, logDir, bin string, args, env []string, echo io.Writer) (*proc, error) {
	return startProcLog(name, logDir, bin, args, env, echo, os.O_APPEND, syscall.SIGKILL)
}

// startMaster is startProc for a process that runs processes of its own, nginx's master and its
// workers: if the launcher dies, it gets SIGTERM, on which it stops its workers, then itself. A
// SIGKILLed master leaves its workers running, listening on the gateway's address, for good: a
// SIGKILLed make ask-serve-cluster left one holding 127.0.0.1:8080, every later start of the
// cluster failed ("nginx exited: exit status 1", bind: address already in use) and so did make
// ask-serve, both until the worker was found and killed by hand.
func startMaster(name, logDir, bin string, args, env []string, echo io.Writer) (*proc, error) {
	return startProcLog(name, logDir, bin, args, env, echo, os.O_TRUNC, syscall.SIGTERM)
}

// startProcLog starts bin, its output to logDir/name.log opened with mode; deathsig is what it
// gets when the launcher dies.
func startProcLog(name, logDir, bin string, args, env []string, echo io.Writer, mode int, deathsig syscall.Signal) (*proc, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|mode, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var out io.Writer = f
	if echo != nil {
		out = io.MultiWriter(f, &prefixWriter{prefix: name + " | ", w: echo})
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cmd.Environ(), env...) // this process's environment, passed through, and env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr(deathsig)
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the exit.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM, waits up to grace, then kills.
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.kill()
	}
}

// log returns what the process has written so far.
func (p *proc) log() []byte {
	b, _ := os.ReadFile(p.logPath)
	return b
}

// waitReady waits until ready reports nil, the process exits, or 30 s pass.
func (p *proc) waitReady(ctx context.Context, ready func() error) error {
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v) before it was ready:\n%s", p.name, p.err, tailOf(p.log(), 2000))
		case <-deadline.C:
			return fmt.Errorf("%s not ready within 30s: %w", p.name, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func tailOf(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// getReady is ready once url answers 200.
func getReady(url string) func() error {
	return func() error {
		c := http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %d", url, resp.StatusCode)
		}
		return nil
	}
}

// prefixWriter prefixes every line written through it; it is safe for concurrent use.
type prefixWriter struct {
	prefix string
	mu     sync.Mutex
	w      io.Writer
	buf    []byte
}

// lockedWriter writes one line at a time to the terminal the processes share.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		_, err := p.w.Write(append(append([]byte(p.prefix), p.buf[:i]...), '\n'))
		if err != nil {
			return len(b), nil // the terminal is gone; the log file still has it
		}
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

var errNotRunning = errors.New("cluster: no replica's log names the ticket")
