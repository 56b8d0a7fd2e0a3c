package main

import (
	"context"
	"log/slog"
	"sync"
	"syscall"
	"time"
)

// member is one replica of the cluster, kept running: when its process dies (a crash, an OOM
// kill, a SIGKILL in a chaos test) the member starts it again with the same name, address and
// environment, appending to the same log, after a backoff that grows while it keeps dying
// young. A replica that is gone is not a reason to stop the cluster: the others serve, and
// the shared store's leases end whatever the dead one was running.
type member struct {
	name  string
	start func() (*proc, error) // starts the process once more (its log appended)
	ready func(context.Context, *proc) error
	log   *slog.Logger

	mu       sync.Mutex
	cur      *proc
	restarts int
	stopping bool
	stopped  chan struct{} // closed by Stop: the supervisor returns
	done     chan struct{} // closed when the supervisor has returned
}

// Backoff between restarts of a replica that keeps dying: from restartMin, doubling up to
// restartMax; reset once a replica has lived restartCalm.
const (
	restartMin  = 200 * time.Millisecond
	restartMax  = 5 * time.Second
	restartCalm = 30 * time.Second
)

func newMember(name string, p *proc, start func() (*proc, error), ready func(context.Context, *proc) error, log *slog.Logger) *member {
	m := &member{name: name, start: start, ready: ready, log: log, cur: p, stopped: make(chan struct{}), done: make(chan struct{})}
	go m.supervise()
	return m
}

func (m *member) proc() *proc {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// Restarts is how many times the replica was started again.
func (m *member) Restarts() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.restarts
}

func (m *member) supervise() {
	defer close(m.done)
	delay := restartMin
	for {
		p := m.proc()
		born := time.Now()
		select {
		case <-m.stopped:
			return
		case <-p.done:
		}
		if time.Since(born) > restartCalm {
			delay = restartMin
		}
		m.log.Warn("replica exited; restarting it", "replica", m.name, "err", errString(p.err), "after", delay)
		t := time.NewTimer(delay)
		select {
		case <-m.stopped:
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, restartMax)
		np, err := m.start()
		if err != nil {
			m.log.Error("replica not restarted", "replica", m.name, "err", err)
			continue // p.done is closed: the next turn waits the backoff and tries again
		}
		m.mu.Lock()
		if m.stopping {
			m.mu.Unlock()
			np.kill()
			return
		}
		m.cur = np
		m.restarts++
		m.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-m.stopped:
				cancel()
			case <-np.done:
			}
		}()
		if err := m.ready(ctx, np); err != nil {
			m.log.Error("restarted replica not ready", "replica", m.name, "err", err)
		} else {
			m.log.Info("replica restarted", "replica", m.name, "pid", np.cmd.Process.Pid)
		}
		cancel()
	}
}

// Stop stops the supervisor, then the process (SIGTERM, then SIGKILL after grace).
func (m *member) Stop(grace time.Duration) {
	m.mu.Lock()
	if !m.stopping {
		m.stopping = true
		close(m.stopped)
	}
	m.mu.Unlock()
	<-m.done
	m.proc().stop(grace)
}

// Kill sends SIGKILL to the current process and waits for it to die; the supervisor then
// restarts it.
func (m *member) Kill() { m.proc().kill() }

// Freeze sends SIGSTOP (the process stays, answering nothing); Thaw sends SIGCONT.
func (m *member) Freeze() error { return m.proc().cmd.Process.Signal(syscall.SIGSTOP) }
func (m *member) Thaw() error   { return m.proc().cmd.Process.Signal(syscall.SIGCONT) }

func errString(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// Terminate sends SIGTERM to the current process (a graceful stop, as a rolling restart's) and
// returns it; the supervisor restarts it once it has exited.
func (m *member) Terminate() (*proc, error) {
	p := m.proc()
	return p, p.cmd.Process.Signal(syscall.SIGTERM)
}
